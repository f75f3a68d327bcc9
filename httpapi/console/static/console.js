// warden console: confirmations for actions and live updates. No inline
// script anywhere (the Content-Security-Policy forbids it).
"use strict";

(function () {
  const main = document.getElementById("main");
  if (!main) return;
  const csrf = main.dataset.csrf;

  // Live updates: the page's main part is fetched again every two
  // seconds and swapped in, unless a dialog is open.
  const dialog = document.getElementById("confirm");
  async function refresh() {
    if (!main.dataset.live || (dialog && dialog.open) || document.hidden) return;
    try {
      const r = await fetch(location.href, { headers: { "X-Partial": "1" }, credentials: "same-origin", cache: "no-store" });
      if (r.ok) main.innerHTML = await r.text();
    } catch (e) { /* the next round tries again */ }
  }
  setInterval(refresh, 2000);

  // Actions: a button opens the confirmation with a required reason; the
  // action is posted with the CSRF token and the page refreshes in place.
  let pending = null;
  main.addEventListener("click", (ev) => {
    const b = ev.target.closest("button.act");
    if (!b || !dialog) return;
    pending = b.dataset;
    document.getElementById("confirm-title").textContent = "Confirm " + b.dataset.action;
    document.getElementById("confirm-what").textContent = b.dataset.action + " " + b.dataset.kind + " " + b.dataset.id + ": say why.";
    document.getElementById("confirm-reason").value = "";
    document.getElementById("confirm-error").textContent = "";
    dialog.showModal();
  });
  if (!dialog) return;
  document.getElementById("confirm-ok").addEventListener("click", async (ev) => {
    ev.preventDefault();
    const reason = document.getElementById("confirm-reason").value.trim();
    const err = document.getElementById("confirm-error");
    if (!reason) { err.textContent = "A reason is required."; return; }
    const body = new URLSearchParams({ kind: pending.kind, id: pending.id, action: pending.action, reason: reason, confirm: "yes", csrf: csrf });
    const r = await fetch("/ui/act", { method: "POST", body: body, credentials: "same-origin", headers: { "X-CSRF-Token": csrf } });
    if (!r.ok) {
      let msg = "refused (" + r.status + ")";
      try { msg = (await r.json()).error.message; } catch (e) { /* keep the status */ }
      err.textContent = msg;
      return;
    }
    dialog.close();
    refresh();
  });
})();
