// The console's money rule for its scripts: the same as funcs.go's locale.money, which writes
// every amount the pages show (the browser tests hold the two to one table). An amount is
// written to the cent, or to sig significant digits when the cent would keep fewer (never
// past the nano-dollar), rounded half away from zero, trailing zeros past the cent trimmed.
"use strict";

// shareaiMoney writes text, a decimal number of dollars as the API writes one ("0.000000368",
// "12.5"), with sig significant digits at least, in loc's digits and separators
// ({digits: "0123456789", decimal: ".", group: ","}). Text that is not a number is returned
// as it is; digits past the nano-dollar are dropped (the API writes none).
function shareaiMoney(text, sig, loc) {
  const m = /^(-?)([0-9]*)(?:\.([0-9]*))?$/.exec(String(text).trim());
  if (!m || (m[2] === "" && !m[3])) return String(text);
  const u = BigInt((m[2] || "0") + ((m[3] || "") + "000000000").slice(0, 9)); // nano-dollars
  const dec = Math.min(Math.max(9 - u.toString().length + sig, 2), 9);
  const unit = 10n ** BigInt(9 - dec), scale = 10n ** BigInt(dec);
  let q = u / unit;
  if (2n * (u % unit) >= unit) q += 1n;
  const frac = (q % scale).toString().padStart(dec, "0").replace(/0+$/, "").padEnd(2, "0");
  const whole = (q / scale).toString().replace(/\B(?=([0-9]{3})+$)/g, ",");
  const digits = Array.from((loc && loc.digits) || "0123456789");
  const local = (whole + "." + frac).replace(/[0-9.,]/g, function (c) {
    if (c === ".") return (loc && loc.decimal) || ".";
    if (c === ",") return (loc && loc.group) || ",";
    return digits[c.charCodeAt(0) - 48];
  });
  return (m[1] === "-" && u > 0n ? "-$" : "$") + local;
}

// shareaiMoney.amountDigits is funcs.go's amountDigits: an amount's significant digits.
shareaiMoney.amountDigits = 2;
