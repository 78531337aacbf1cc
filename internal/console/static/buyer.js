// The keys page: a button copies the new key, shown once, to the clipboard.
"use strict";
(function () {
  document.querySelectorAll("button[data-copy]").forEach(function (btn) {
    const target = document.getElementById(btn.dataset.copy);
    if (!target) return;
    btn.hidden = false;
    const label = btn.textContent;
    btn.addEventListener("click", async function () {
      const text = target.textContent.trim();
      try {
        await navigator.clipboard.writeText(text);
        btn.textContent = btn.dataset.copied || label;
        setTimeout(function () { btn.textContent = label; }, 2000);
      } catch (e) {
        // No clipboard (a page not served over HTTPS): select the key for the user to copy.
        const range = document.createRange();
        range.selectNodeContents(target);
        const sel = window.getSelection();
        sel.removeAllRanges();
        sel.addRange(range);
      }
    });
  });
})();
