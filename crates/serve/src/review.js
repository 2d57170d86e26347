// nmb review: saves the grading form on every change and adds keyboard shortcuts. The only script nmb serves;
// the page works without it (a plain form post saves and goes on).
(function () {
  "use strict";
  var form = document.getElementById("grade");
  if (!form) {
    return;
  }
  var status = document.getElementById("save-status");
  var legend = document.getElementById("keys");
  if (legend) {
    legend.hidden = false;
  }
  // Saves run one after another, so the newest change is also the newest grade stored; "saved" shows once
  // the last of them is in.
  var queue = Promise.resolve();
  var waiting = 0;

  function show(text, bad) {
    status.textContent = text;
    status.className = bad ? "save-status bad" : "save-status";
  }

  function post(body) {
    return fetch(form.action, {
      method: "POST",
      body: body,
      credentials: "same-origin",
      headers: { "Accept": "application/json" }
    }).then(function (r) {
      if (r.ok) {
        return null;
      }
      return r.json().then(function (j) {
        return "not saved: " + (j.problems || []).join("; ");
      }, function () {
        return "not saved (" + r.status + ")";
      });
    }, function () {
      return "not saved: the server did not answer";
    }).then(function (error) {
      waiting -= 1;
      if (error) {
        show(error, true);
      } else if (waiting === 0) {
        show("saved", false);
      }
    });
  }

  function save() {
    // The form as it is now, not as it will be when this save's turn comes.
    var body = new URLSearchParams(new FormData(form));
    waiting += 1;
    show("saving…", false);
    queue = queue.then(function () { return post(body); });
    return queue;
  }

  form.addEventListener("change", save);

  function typing(el) {
    if (!el) {
      return false;
    }
    var tag = el.tagName;
    return tag === "TEXTAREA" || tag === "SELECT" ||
      (tag === "INPUT" && el.type !== "radio" && el.type !== "checkbox");
  }

  // Checks a radio as a click would, so the change is saved.
  function pick(input) {
    if (!input) {
      return;
    }
    input.checked = true;
    input.focus();
    input.dispatchEvent(new Event("change", { bubbles: true }));
  }

  // Moves to the next rubric row, or leaves the rows after the last one.
  function advance(row) {
    var rows = Array.prototype.slice.call(form.querySelectorAll("fieldset.score"));
    var next = rows[rows.indexOf(row) + 1];
    if (next) {
      (next.querySelector("input:checked") || next.querySelector("input")).focus();
    } else if (document.activeElement) {
      document.activeElement.blur();
    }
  }

  function go(link) {
    if (link) {
      queue.then(function () { window.location.href = link.href; });
    }
  }

  function saveAndNext() {
    var button = form.querySelector("button[name=go]");
    queue.then(function () {
      if (form.requestSubmit) {
        form.requestSubmit(button);
      } else {
        button.click();
      }
    });
  }

  var verdicts = { "1": "correct", "2": "partly", "3": "incorrect", "s": "skip" };
  // A pairwise page's vote.
  var choices = { "a": "a", "b": "b", "t": "tie", "n": "neither" };

  document.addEventListener("keydown", function (e) {
    if (e.ctrlKey || e.metaKey || e.altKey) {
      return;
    }
    var el = document.activeElement;
    if (e.key === "Escape") {
      if (el && el.blur) {
        el.blur();
      }
      return;
    }
    if (typing(el)) {
      return;
    }
    var row = el && el.closest ? el.closest("fieldset.score") : null;
    if (row && /^[0-9]$/.test(e.key)) {
      var input = row.querySelector("input[value='" + e.key + "']");
      if (input) {
        e.preventDefault();
        pick(input);
        advance(row);
      }
      return;
    }
    var choice = choices[e.key] && form.querySelector("input[name=choice][value=" + choices[e.key] + "]");
    if (choice) {
      e.preventDefault();
      pick(choice);
      return;
    }
    if (verdicts[e.key]) {
      e.preventDefault();
      pick(form.querySelector("input[name=verdict][value=" + verdicts[e.key] + "]"));
      return;
    }
    // Arrow keys on a radio move within its row, as browsers do.
    var onRadio = el && el.tagName === "INPUT";
    if (e.key === "j" || (e.key === "ArrowRight" && !onRadio)) {
      e.preventDefault();
      saveAndNext();
    } else if (e.key === "k" || (e.key === "ArrowLeft" && !onRadio)) {
      e.preventDefault();
      go(document.getElementById("prev"));
    }
  });
})();
