"""Opening documents, rendering pages, text layers and blank detection."""
