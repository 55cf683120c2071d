// Swagger UI for ocrflow's API, from files served by the service itself (no CDN, no inline
// script: the page's Content-Security-Policy allows scripts from this origin only).
window.addEventListener("load", () => {
  window.ui = SwaggerUIBundle({
    url: "/openapi.json",
    dom_id: "#swagger-ui",
    deepLinking: true,
    presets: [SwaggerUIBundle.presets.apis, SwaggerUIBundle.SwaggerUIStandalonePreset],
    layout: "BaseLayout",
  });
});
