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

  // A run's page follows the run's own event stream: each batch of new
  // events says change, and the run's end says end, after which nothing
  // more comes. Other pages watch a fingerprint of what they show.
  function connect() {
    var follow = body.dataset.follow;
    source = new EventSource(follow || "/console/live?view=" + encodeURIComponent(view) + "&v=" + encodeURIComponent(version));
    source.addEventListener("open", function () { if (status) status.textContent = "live"; });
    source.addEventListener("error", function () { if (status && source.readyState !== EventSource.CLOSED) status.textContent = "reconnecting…"; });
    source.addEventListener("change", function (ev) { refresh(ev.data); });
    source.addEventListener("end", function () { source.close(); refresh(""); });
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
