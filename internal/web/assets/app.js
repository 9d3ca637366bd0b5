// troupe dashboard: applies the server's live updates and posts the
// actions. Everything it inserts was rendered (and escaped) by the server.
(function () {
  'use strict';
  var live = document.getElementById('live');
  var last = {};
  var src = document.body.getAttribute('data-stream');
  function status(text, on) {
    if (!live) return;
    live.textContent = text;
    live.className = 'live ' + (on ? 'on' : 'off');
  }
  if (src && window.EventSource) {
    var es = new EventSource(src);
    es.addEventListener('update', function (e) {
      var u = JSON.parse(e.data);
      Object.keys(u.frags || {}).forEach(function (id) {
        var el = document.getElementById(id);
        if (!el || last[id] === u.frags[id]) return;
        // A form being typed into keeps its text: that section waits.
        if (el.contains(document.activeElement) && document.activeElement.tagName === 'INPUT') return;
        last[id] = u.frags[id];
        el.innerHTML = u.frags[id];
      });
      document.body.setAttribute('data-version', String(u.v));
      status(u.gone ? 'ended' : 'live', !u.gone);
      if (u.gone) es.close();
    });
    es.onerror = function () { status('reconnecting…', false); };
  }
  document.addEventListener('submit', function (ev) {
    var f = ev.target;
    if (!f.classList || !f.classList.contains('act')) return;
    ev.preventDefault();
    var body = new URLSearchParams(new FormData(f, ev.submitter));
    var buttons = f.querySelectorAll('button');
    buttons.forEach(function (b) { b.disabled = true; });
    fetch(f.action, { method: 'POST', body: body, credentials: 'same-origin', headers: { 'Accept': 'application/json' } })
      .then(function (r) { return r.json().then(function (j) { return { ok: r.ok, j: j }; }); })
      .then(function (res) {
        var note = document.createElement('span');
        note.className = res.ok ? 'note ok' : 'note error';
        note.textContent = res.ok ? (res.j.done || 'done') : (res.j.error || 'failed');
        f.appendChild(note);
        if (res.ok) f.reset();
      })
      .catch(function (err) { status('action failed: ' + err, false); })
      .finally(function () { buttons.forEach(function (b) { b.disabled = false; }); });
  });
})();
