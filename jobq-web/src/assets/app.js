// jobq dashboard: refreshes the page's live part (#live) every few seconds
// without reloading the page. Pages read the same without it.
(function () {
  "use strict";
  var live = document.getElementById("live");
  var toggle = document.getElementById("refresh-toggle");
  var status = document.getElementById("refresh-status");
  if (!live || !toggle || !live.hasAttribute("data-refresh")) {
    return;
  }
  var every = parseInt(live.getAttribute("data-refresh"), 10) || 3000;
  var key = "jobq-refresh-paused";
  var paused = false;
  try {
    paused = window.localStorage.getItem(key) === "1";
  } catch (e) {}
  var busy = false;

  function show(text) {
    toggle.textContent = paused ? "Resume refresh" : "Pause refresh";
    toggle.setAttribute("aria-pressed", paused ? "true" : "false");
    if (status) {
      status.textContent = text || (paused ? "refresh paused" : "live");
      status.className = paused ? "paused" : "";
    }
  }

  function tick() {
    if (paused || busy || document.hidden) {
      return;
    }
    busy = true;
    fetch(window.location.href, {
      headers: { "X-Jobq-Fragment": "1" },
      credentials: "same-origin",
      cache: "no-store"
    })
      .then(function (response) {
        if (!response.ok) {
          throw new Error("HTTP " + response.status);
        }
        return response.text();
      })
      .then(function (html) {
        live.innerHTML = html;
        show("live · " + new Date().toLocaleTimeString());
      })
      .catch(function (error) {
        show("refresh failed: " + error.message);
      })
      .then(function () {
        busy = false;
      });
  }

  toggle.hidden = false;
  toggle.addEventListener("click", function () {
    paused = !paused;
    try {
      window.localStorage.setItem(key, paused ? "1" : "0");
    } catch (e) {}
    show();
    tick();
  });
  show();
  window.setInterval(tick, every);
})();
