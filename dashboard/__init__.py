"""roofwatch dashboard: server-rendered pages with Plotly charts (plotly.js served locally)."""
