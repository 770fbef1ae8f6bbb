// Live updates: the server says "change" when what this page shows has
// changed; the page fetches itself again and swaps its main content, so
// a decision taken elsewhere or a run moving on appears without a reload.
(function () {
  "use strict";
  var body = document.body;
  var view = body.dataset.live;
  if (!view || !window.EventSource) return;
  var status = document.getElementById("live-status");
  var version = body.dataset.version;
  var source;

  function connect() {
    source = new EventSource("/console/live?view=" + encodeURIComponent(view) + "&v=" + encodeURIComponent(version));
    source.addEventListener("open", function () { if (status) status.textContent = "live"; });
    source.addEventListener("error", function () { if (status) status.textContent = "reconnecting…"; });
    source.addEventListener("change", function (ev) { refresh(ev.data); });
  }

  // An open form (an edit or a rejection being typed) is never swapped
  // away under the person typing it.
  function busy() {
    var el = document.activeElement;
    return el && (el.tagName === "TEXTAREA" || el.tagName === "INPUT") && el.value !== "";
  }

  function refresh(next) {
    if (busy()) { setTimeout(function () { refresh(next); }, 1000); return; }
    fetch(window.location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        var main = doc.getElementById("main");
        if (!main) return;
        // What the person opened (an event's details, the raw packet, a
        // form) stays open in the new content.
        var open = Array.prototype.map.call(document.querySelectorAll("#main details[open][id]"), function (d) { return d.id; });
        document.getElementById("main").innerHTML = main.innerHTML;
        open.forEach(function (id) { var d = document.getElementById(id); if (d) d.open = true; });
        var header = doc.querySelector("header.top");
        if (header) document.querySelector("header.top").innerHTML = header.innerHTML;
        version = doc.body.dataset.version || next;
        body.dataset.version = version;
        if (status) status.textContent = "updated " + new Date().toLocaleTimeString();
      })
      .catch(function () { if (status) status.textContent = "update failed; reload the page"; });
  }

  connect();
})();
