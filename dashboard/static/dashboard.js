// What every dashboard page runs. Pages carry no inline script (the CSP allows scripts from this
// origin only): charts and behaviour are declared with data attributes and wired up here.
(function () {
  "use strict";

  // <div data-figure="ID" data-click="/runs/">: draws the figure in <script type="application/json" id="ID">
  // ({data, layout, config}); a click on a point opens data-click + the point's customdata.
  document.querySelectorAll("[data-figure]").forEach(function (el) {
    var figure = JSON.parse(document.getElementById(el.dataset.figure).textContent);
    Plotly.newPlot(el, figure);
    var target = el.dataset.click;
    if (target) {
      el.on("plotly_click", function (ev) {
        var id = ev.points[0].customdata;
        if (id) { window.location = target + id; }
      });
    }
  });

  // <select data-submit-on-change>: the filter bar applies a choice at once.
  document.querySelectorAll("select[data-submit-on-change]").forEach(function (select) {
    select.addEventListener("change", function () { select.form.submit(); });
  });

  // <a data-toggles="ID">: shows or hides the element ID.
  document.querySelectorAll("[data-toggles]").forEach(function (link) {
    link.addEventListener("click", function (ev) {
      ev.preventDefault();
      var shown = document.getElementById(link.dataset.toggles);
      shown.hidden = !shown.hidden;
    });
  });

  // The compare page's "chart another benchmark": adds ?show=ID and jumps to its chart.
  var select = document.getElementById("show-benchmark");
  if (select) {
    select.addEventListener("change", function () {
      if (!select.value) { return; }
      var params = new URLSearchParams(window.location.search);
      params.append("show", select.value);
      window.location = "?" + params.toString() + "#dist-" + select.value;
    });
  }
})();
