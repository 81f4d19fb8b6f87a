// The changes page's triage: the API token lives in this tab's sessionStorage, the buttons PATCH
// /api/changes/{id} with it. A file of its own: the CSP allows scripts from this origin only.
(function () {
  var KEY = "roofwatch.apiToken";
  var input = document.getElementById("token-input");
  var status = document.getElementById("token-status");
  function token() { return window.sessionStorage.getItem(KEY) || ""; }
  function showStatus() {
    status.textContent = token() ? "Token set for this tab: the buttons below triage."
      : "No token in this tab: enter the server's API token (ROOFWATCH_API_TOKEN) to use the buttons.";
  }
  function save() {
    var value = input.value.trim();
    if (value) { window.sessionStorage.setItem(KEY, value); } else { window.sessionStorage.removeItem(KEY); }
    input.value = "";
    showStatus();
  }
  document.getElementById("token-save").addEventListener("click", save);
  input.addEventListener("keydown", function (ev) { if (ev.key === "Enter") { save(); } });
  document.getElementById("token-forget").addEventListener("click", function () {
    window.sessionStorage.removeItem(KEY);
    showStatus();
  });
  showStatus();

  function explain(code, body) {
    var detail = body && body.detail;
    if (Array.isArray(detail)) { detail = detail.map(function (d) { return d.msg; }).join("; "); }
    if (code === 401) { return "The token was refused (401): enter the right one above."; }
    if (code === 403) { return "The server refuses triage (403): " + (detail || "it has no API token set."); }
    if (code === 404) { return "This change no longer exists (404)."; }
    if (code === 422) { return "Not accepted (422): " + (detail || "invalid request."); }
    return "Failed (" + code + "): " + (detail || "unexpected response.");
  }
  function renderHistory(list, history) {
    list.textContent = "";
    history.forEach(function (h) {
      var item = document.createElement("li");
      item.textContent = (h.from || "") + " → " + (h.to || "") + (h.note ? ": " + h.note : "") + " ";
      var who = document.createElement("span");
      who.className = "muted";
      who.textContent = (h.by || "") + " " + (h.at || "").slice(0, 16).replace("T", " ");
      item.appendChild(who);
      list.appendChild(item);
    });
  }
  function update(row, change) {
    row.dataset.state = change.state;
    var cell = row.querySelector(".state-cell");
    cell.textContent = change.state;
    cell.className = "state-cell triage-" + change.state;
    renderHistory(row.querySelector("ol.history"), (change.details && change.details.triage) || []);
    row.querySelector("input.note").value = "";
  }
  function setButtons(row, busy) {
    row.querySelectorAll("button[data-state]").forEach(function (b) {
      b.disabled = busy || b.dataset.state === row.dataset.state;
    });
  }
  var table = document.getElementById("changes");
  if (!table) { return; }
  table.addEventListener("click", function (ev) {
    var button = ev.target.closest("button[data-state]");
    if (!button) { return; }
    var row = button.closest("tr[data-change-id]");
    var message = row.querySelector(".action-message");
    if (!token()) {
      message.className = "action-message error";
      message.textContent = "A token is needed: enter the server's API token above, then try again.";
      return;
    }
    setButtons(row, true);
    message.className = "action-message";
    message.textContent = "saving…";
    fetch("/api/changes/" + row.dataset.changeId, {
      method: "PATCH",
      headers: {"Authorization": "Bearer " + token(), "Content-Type": "application/json"},
      body: JSON.stringify({state: button.dataset.state, note: row.querySelector("input.note").value})
    }).then(function (response) {
      return response.json().catch(function () { return {}; }).then(function (body) {
        if (!response.ok) { throw new Error(explain(response.status, body)); }
        update(row, body);
        message.className = "action-message ok";
        message.textContent = "now " + body.state;
      });
    }).catch(function (error) {
      message.className = "action-message error";
      message.textContent = error.message;
    }).then(function () { setButtons(row, false); });
  });
})();
