// The playground: sends the form to POST /buyer/playground/chat (the session's cookie and the
// form's CSRF token authorize it; no API key is ever in the page) and reads the answer's
// server-sent events as they come, appending the text to #answer and, at the end, the cost
// to #answer-cost, written by money.js's rule as the pages write money.
"use strict";
(function () {
  const form = document.getElementById("playground");
  if (!form) return;
  const send = document.getElementById("send");
  const answer = document.getElementById("answer");
  const costEl = document.getElementById("answer-cost");
  const errEl = document.getElementById("answer-error");
  const sendLabel = send.textContent;

  // local writes a number with the page language's digits and decimal separator.
  function local(s) {
    const digits = Array.from(costEl.dataset.digits || "0123456789");
    const decimal = costEl.dataset.decimal || ".";
    return String(s).replace(/[0-9.]/g, function (c) {
      return c === "." ? decimal : digits[c.charCodeAt(0) - 48];
    });
  }

  function showError(msg) {
    errEl.textContent = msg;
    errEl.hidden = false;
  }

  function busy(on) {
    send.disabled = on;
    send.textContent = on ? (send.dataset.busy || sendLabel) : sendLabel;
    answer.setAttribute("aria-busy", on ? "true" : "false");
  }

  // errorOf reads an OpenAI error body, or says the request failed.
  async function errorOf(resp) {
    try {
      const body = await resp.json();
      if (body && body.error && body.error.message) return body.error.message;
    } catch (e) { /* not JSON */ }
    return (errEl.dataset.failed || "Error") + " (" + resp.status + ")";
  }

  // handle reads one event's data. It returns true at [DONE].
  function handle(data, state) {
    if (data === "[DONE]") return true;
    let ev;
    try { ev = JSON.parse(data); } catch (e) { return false; }
    if (ev.error) {
      state.failed = true;
      showError(ev.error.message || errEl.dataset.failed || "Error");
      return false;
    }
    const choice = ev.choices && ev.choices[0];
    if (choice) {
      if (choice.delta && typeof choice.delta.content === "string" && choice.delta.content !== "") {
        answer.appendChild(document.createTextNode(choice.delta.content));
      }
      if (choice.finish_reason === "error") state.failed = true;
    }
    if (ev.usage) {
      // The cost's exact decimal text: a float would print tiny amounts as 1.2e-7.
      const m = /"cost"\s*:\s*"?([0-9]+(?:\.[0-9]+)?)/.exec(data);
      state.cost = m ? m[1] : String(ev.usage.cost);
      state.tokens = ev.usage.total_tokens;
    }
    return false;
  }

  form.addEventListener("submit", async function (e) {
    e.preventDefault();
    if (send.disabled) return;
    answer.textContent = "";
    costEl.textContent = "";
    errEl.textContent = "";
    errEl.hidden = true;
    busy(true);
    const state = { done: false, failed: false, cost: null, tokens: null };
    try {
      const resp = await fetch(form.action, {
        method: "POST",
        body: new URLSearchParams(new FormData(form)),
        headers: { "Accept": "text/event-stream" },
        credentials: "same-origin",
      });
      const type = resp.headers.get("Content-Type") || "";
      if (!resp.ok || !type.startsWith("text/event-stream")) {
        showError(await errorOf(resp));
        return;
      }
      const reader = resp.body.getReader();
      const decoder = new TextDecoder();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += decoder.decode(value, { stream: true });
        let i;
        while ((i = buf.indexOf("\n\n")) >= 0) {
          const event = buf.slice(0, i);
          buf = buf.slice(i + 2);
          const data = event.split("\n")
            .filter(function (l) { return l.startsWith("data:"); })
            .map(function (l) { return l.slice(5).replace(/^ /, ""); })
            .join("\n");
          if (data !== "" && handle(data, state)) state.done = true;
        }
      }
      if (!state.done && !state.failed) showError(errEl.dataset.cut || "The answer was cut short.");
    } catch (err) {
      showError((errEl.dataset.failed || "Error") + ": " + err.message);
    } finally {
      if (state.cost !== null) {
        const loc = { digits: costEl.dataset.digits, decimal: costEl.dataset.decimal, group: costEl.dataset.group };
        let text = (costEl.dataset.label || "Cost") + ": " + shareaiMoney(state.cost, shareaiMoney.amountDigits, loc);
        if (state.tokens !== null && state.tokens !== undefined) {
          text += " · " + local(state.tokens) + " " + (costEl.dataset.tokens || "tokens");
        }
        costEl.textContent = text;
      }
      busy(false);
    }
  });
})();
