"""The review site's style sheet and script, inlined into every page (no CDN, no build step:
the site opens from disk, offline, in any browser)."""

from __future__ import annotations

STYLE = """
:root { --ok: #1a7f37; --partial: #9a6700; --failed: #cf222e; --muted: #57606a; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, sans-serif; margin: 0; color: #1f2328; background: #f6f8fa; }
header, main { padding: 12px 20px; }
header { background: #fff; border-bottom: 1px solid #d0d7de; }
h1 { font-size: 20px; margin: 0 0 6px; word-break: break-all; }
.muted, .meta { color: var(--muted); }
.status { font-weight: 600; text-transform: uppercase; font-size: 12px; }
.status-ok { color: var(--ok); } .status-partial { color: var(--partial); }
.status-failed { color: var(--failed); }
.error, .missing { color: var(--failed); white-space: pre-wrap; word-break: break-word; }
.filters { display: flex; flex-wrap: wrap; gap: 10px; align-items: center; margin: 8px 0; }
table.docs { border-collapse: collapse; width: 100%; background: #fff; }
table.docs th { cursor: pointer; }
table.docs th, table.docs td { border: 1px solid #d0d7de; padding: 4px 8px; text-align: left;
  vertical-align: top; }
table.docs td.message { max-width: 40em; word-break: break-word; }
section.page { background: #fff; border: 1px solid #d0d7de; margin: 14px 0; padding: 10px; }
section.page h2 { font-size: 16px; margin: 0 0 4px; }
.cols { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1fr); gap: 14px; }
.image img { width: 100%; height: auto; border: 1px solid #d0d7de; }
.markdown { overflow-wrap: anywhere; }
.markdown img { max-width: 100%; border: 1px dashed #8c959f; }
.markdown table { border-collapse: collapse; }
.markdown th, .markdown td { border: 1px solid #d0d7de; padding: 2px 6px; }
.markdown pre { white-space: pre-wrap; }
.whole { background: #fff; border: 1px solid #d0d7de; padding: 10px; }
"""

FILTER_SCRIPT = """
(function () {
  var rows = Array.prototype.slice.call(document.querySelectorAll('#docs tbody tr'));
  var status = document.getElementById('f-status');
  var route = document.getElementById('f-route');
  var flag = document.getElementById('f-flag');
  var text = document.getElementById('f-text');
  var shown = document.getElementById('shown');
  function has(list, word) { return (' ' + list + ' ').indexOf(' ' + word + ' ') >= 0; }
  function apply() {
    var query = text.value.trim().toLowerCase();
    var count = 0;
    rows.forEach(function (row) {
      var d = row.dataset;
      var keep = (!status.value || d.status === status.value) &&
        (!route.value || has(d.routes, route.value)) &&
        (!flag.value || has(d.flags, flag.value)) &&
        (!query || d.search.indexOf(query) >= 0);
      row.hidden = !keep;
      if (keep) { count += 1; }
    });
    shown.textContent = String(count);
  }
  // Rows come in the order the run's records were listed: a click on a heading sorts them.
  var body = document.querySelector('#docs tbody');
  document.querySelectorAll('#docs thead th').forEach(function (th, column) {
    th.addEventListener('click', function () {
      var down = th.dataset.dir !== 'asc';
      th.dataset.dir = down ? 'asc' : 'desc';
      rows.sort(function (a, b) {
        var x = a.cells[column].textContent, y = b.cells[column].textContent;
        var order = (isNaN(x) || isNaN(y)) ? x.localeCompare(y) : Number(x) - Number(y);
        return down ? order : -order;
      });
      rows.forEach(function (row) { body.appendChild(row); });
    });
  });
  [status, route, flag].forEach(function (el) { el.addEventListener('change', apply); });
  text.addEventListener('input', apply);
  apply();
})();
"""
