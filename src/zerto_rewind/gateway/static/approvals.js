// The approvals page's only script, served as /static/app.js: the page's
// Content-Security-Policy allows no inline script. approvals_pages.script()
// fills in @POLL_MS@ (how often the page asks whether something changed).
(function () {
  "use strict";
  var POLL_MS = @POLL_MS@;
  var body = document.body;
  var page = body.getAttribute("data-page");
  var base = body.getAttribute("data-base") || "";

  function relative(ts) {
    var delta = ts - Date.now() / 1000, span = Math.abs(delta), text;
    if (span < 60) { text = Math.floor(span) + " s"; }
    else if (span < 3600) { text = Math.floor(span / 60) + " min"; }
    else { text = (span / 3600).toFixed(1) + " h"; }
    return delta > 0 ? "in " + text : text + " ago";
  }
  function tick() {
    var times = document.querySelectorAll("time[data-ts]");
    for (var i = 0; i < times.length; i++) {
      times[i].textContent = relative(parseFloat(times[i].getAttribute("data-ts")));
    }
  }
  function status(text) {
    var el = document.getElementById("status");
    if (el) { el.textContent = text; }
  }

  if (page === "login") {
    // A link from a notification arrives cross-site, without the SameSite=Strict
    // cookie: if this browser is in fact logged in, go on to where it was going.
    fetch(base + "/api/session", {credentials: "same-origin", cache: "no-store"})
      .then(function (r) { return r.json(); })
      .then(function (data) {
        if (data && data.approver) {
          var next = document.querySelector("input[name=next]");
          location.replace(base + (next ? next.value : "/"));
        }
      })
      .catch(function () {});
    return;
  }

  if (page === "sessions" || page === "session" || page === "rewind-plan") {
    return; // read from the log when asked for; not redrawn by the approvals poll
  }

  if (page === "rewind-run") {
    // A rewind runs in the gateway: follow its JSON, redraw the live part when it
    // moved, and load the whole page once it ended (its report, a resume).
    var FOLLOW_MS = 1000;
    var follow = function () {
      var live = document.getElementById("live");
      if (!live || live.getAttribute("data-active") !== "1") { return; }
      var plan = encodeURIComponent(live.getAttribute("data-plan") || "");
      fetch(base + "/api/rewinds/" + plan, {
        credentials: "same-origin", cache: "no-store", headers: {"X-Zr-Background": "1"}
      })
        .then(function (r) {
          if (!r.ok) { throw new Error("status " + r.status); }
          return r.json();
        })
        .then(function (data) {
          if (!data.active) { location.reload(); return null; }
          status("Following the run; this page updates itself every second.");
          if (data.version !== live.getAttribute("data-version")) { return redraw(); }
          return null;
        })
        .catch(function () { status("Cannot reach the gateway; retrying\u2026"); })
        .then(function () { setTimeout(follow, FOLLOW_MS); });
    };
    setTimeout(follow, FOLLOW_MS);
    return;
  }

  function version() {
    var live = document.getElementById("live");
    return live ? live.getAttribute("data-version") : null;
  }
  // Declared below the pages that return early, and hoisted: the rewind's page uses it too.
  function redraw() {
    return fetch(location.pathname, {
      credentials: "same-origin", cache: "no-store", headers: {"X-Zr-Background": "1"}
    }).then(function (r) { return r.text(); }).then(function (text) {
      var fresh = new DOMParser().parseFromString(text, "text/html").getElementById("live");
      var live = document.getElementById("live");
      if (!fresh || !live) { return; }
      // Keep what a person is typing in a reason box across the redraw.
      var typed = {}, focused = null, boxes = live.querySelectorAll("input[name=note]");
      for (var i = 0; i < boxes.length; i++) {
        var key = boxes[i].getAttribute("data-request");
        if (boxes[i].value) { typed[key] = boxes[i].value; }
        if (boxes[i] === document.activeElement) { focused = key; }
      }
      fresh = document.importNode(fresh, true);
      live.parentNode.replaceChild(fresh, live);
      boxes = fresh.querySelectorAll("input[name=note]");
      for (var j = 0; j < boxes.length; j++) {
        var id = boxes[j].getAttribute("data-request");
        if (typed[id]) { boxes[j].value = typed[id]; }
        if (id === focused) { boxes[j].focus(); }
      }
      tick();
    });
  }
  function poll() {
    fetch(base + "/api/pending", {credentials: "same-origin", cache: "no-store"})
      .then(function (r) {
        if (r.status === 401) {
          var here = location.pathname.slice(base.length) || "/";
          location.assign(base + "/login?next=" + encodeURIComponent(here));
          return null;
        }
        if (!r.ok) { throw new Error("status " + r.status); }
        return r.json();
      })
      .then(function (data) {
        if (!data) { return null; }
        status("Up to date; this page updates itself every " + POLL_MS / 1000 + " s.");
        if (data.version !== version()) { return redraw(); }
        return null;
      })
      .catch(function () { status("Cannot reach the approvals service; retrying\u2026"); })
      .then(function () { setTimeout(poll, POLL_MS); });
  }
  setInterval(tick, 1000);
  setTimeout(poll, POLL_MS);
})();
