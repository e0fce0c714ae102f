// agentrag playground: plain DOM, no dependencies, talks to this origin only (see the page's CSP).
// Retrieved text is untrusted: it is only ever set with textContent, never parsed as HTML.
"use strict";
(function () {
  const $ = (id) => document.getElementById(id);
  const state = { tenantClaim: "tenant_id", history: [], busy: false };

  function el(tag, attrs, text) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  function token() { return $("token").value.trim(); }
  function claims() {
    try {
      const part = token().split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
      return JSON.parse(atob(part + "===".slice((part.length + 3) % 4)));
    } catch (e) { return null; }
  }
  function tenant() { const c = claims(); return c ? c[state.tenantClaim] : null; }
  function headers(extra) { return Object.assign({ "Authorization": "Bearer " + token(), "Content-Type": "application/json" }, extra || {}); }
  function status(text, isError) { const s = $("status"); s.textContent = text || ""; s.className = isError ? "error" : ""; }
  function notice(text, kind) { const n = $("notice"); n.hidden = !text; n.textContent = text || ""; n.className = kind || ""; }
  function busy(on) { state.busy = on; for (const id of ["ask", "search", "connect"]) $(id).disabled = on; }
  async function errorText(response) {
    try { const body = await response.json(); const e = body.error || {}; return response.status + " " + (e.code || "") + ": " + (e.message || ""); }
    catch (e) { return "HTTP " + response.status; }
  }
  function selectedCollections() { return Array.from(document.querySelectorAll("#collections input:checked")).map((i) => i.value); }
  function filters() {
    const out = {};
    const cls = $("classification").value.trim();
    if (cls) out.classification = cls;
    const start = $("date-start").value, end = $("date-end").value;
    if (start || end) { out.date_range = {}; if (start) out.date_range.start = start; if (end) out.date_range.end = end; }
    return Object.keys(out).length ? out : null;
  }
  function topK() { return Math.max(1, Math.min(50, parseInt($("top-k").value, 10) || 5)); }

  async function connect() {
    if (!token()) { status("Paste a token first.", true); $("token").focus(); return; }
    busy(true);
    try {
      const response = await fetch("/v1/models", { headers: headers() });
      if (!response.ok) { status(await errorText(response), true); return; }
      const models = (await response.json()).data.map((m) => m.id).filter((id) => id.startsWith("agentrag/"));
      const box = $("collections"); box.textContent = "";
      for (const id of models) {
        const name = id.slice("agentrag/".length);
        const label = el("label"); const input = el("input", { type: "checkbox", value: name });
        label.append(input, document.createTextNode(name)); box.append(label);
      }
      if (!models.length) box.append(el("em", {}, "no collections yet: ingest documents first"));
      $("who").textContent = "tenant: " + (tenant() || "?");
      status("Connected.");
    } catch (e) { status("Request failed: " + e, true); }
    finally { busy(false); }
  }

  function renderChunks(chunks, spans) {
    const list = $("chunks"); list.textContent = "";
    for (const chunk of chunks) {
      const item = el("li", { id: "chunk-" + chunk.chunk_id });
      const where = [chunk.collection, chunk.original_filename || chunk.source, chunk.section, chunk.page ? "p. " + chunk.page : null]
        .filter(Boolean).join(" · ");
      item.append(el("div", { class: "meta" }, "#" + chunk.rank + " " + where + " · chars " + chunk.start_char + "-" + chunk.end_char + " · score " + Number(chunk.score).toFixed(3)));
      const text = el("div", { class: "text" });
      const mine = spans.filter((s) => s.chunk_id === chunk.chunk_id).sort((a, b) => a.start - b.start);
      let at = 0;
      for (const span of mine) {
        if (span.start < at) continue;  // overlapping spans: the first one is shown
        text.append(document.createTextNode(chunk.text.slice(at, span.start)));
        text.append(el("mark", { class: "support", "data-span": String(span.index), title: "supports sentence " + (span.index + 1) }, chunk.text.slice(span.start, span.end)));
        at = span.end;
      }
      text.append(document.createTextNode(chunk.text.slice(at)));
      item.append(text);
      list.append(item);
    }
  }

  function activate(index, on) {
    for (const node of document.querySelectorAll('[data-span="' + index + '"]')) node.classList.toggle("active", on);
    const mark = document.querySelector('mark.support[data-span="' + index + '"]');
    if (on && mark) mark.scrollIntoView({ block: "nearest", behavior: "smooth" });
  }

  function renderAnswer(content, spans) {
    const answer = $("answer"); answer.textContent = "";
    const byIndex = new Map(spans.map((s) => [s.index, s]));
    const parts = content.split(/((?:\s*\[\d+\])+)/);
    let k = 0;
    for (let i = 0; i < parts.length; i++) {
      const part = parts[i];
      if (i % 2 === 1) { answer.append(document.createTextNode(part)); k++; continue; }
      const isSentence = i + 1 < parts.length && byIndex.has(k);
      if (!isSentence) { answer.append(document.createTextNode(part)); continue; }
      const node = el("span", { class: "sentence", tabindex: "0", "data-span": String(k) }, part);
      const index = k;
      for (const [ev, on] of [["mouseenter", true], ["mouseleave", false], ["focus", true], ["blur", false]]) node.addEventListener(ev, () => activate(index, on));
      answer.append(node);
    }
  }

  function explain(extra, content) {
    const proof = extra.proof || {};
    if (!proof.chunks || !proof.chunks.length) { notice("Nothing was retrieved for this question in this scope. " + content, ""); return; }
    if (extra.abstained) { notice("The service abstained: none of the retrieved passages answers this question (below: the closest ones).", "abstained"); return; }
    if (extra.grounded === false) { notice("Some sentences of this answer cite no retrieved passage: read them with care.", ""); return; }
    notice("");
  }

  async function ask() {
    const question = $("question").value.trim();
    if (!question) { status("Type a question.", true); $("question").focus(); return; }
    if (!token()) { status("Paste a token first.", true); $("token").focus(); return; }
    const names = selectedCollections();
    const body = { model: names.length ? "agentrag/" + names.join("+") : "agentrag", stream: true, top_k: topK(),
      messages: state.history.concat([{ role: "user", content: question }]) };
    const f = filters(); if (f) body.filters = f;
    body.mode = $("mode").value;
    busy(true); notice(""); $("answer").textContent = ""; $("chunks").textContent = ""; $("proof").textContent = ""; $("timings").textContent = "";
    status("Asking…");
    const started = performance.now(); let first = null; let content = ""; let extra = null; let pieces = 0;
    try {
      const response = await fetch("/v1/chat/completions", { method: "POST", headers: headers({ Accept: "text/event-stream" }), body: JSON.stringify(body) });
      if (!response.ok) { status(await errorText(response), true); return; }
      const reader = response.body.getReader(); const decoder = new TextDecoder(); let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let cut;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          const event = buffer.slice(0, cut); buffer = buffer.slice(cut + 2);
          const data = event.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n");
          if (!data || data === "[DONE]") continue;
          const chunk = JSON.parse(data);
          if (chunk.error) { status("Error: " + chunk.error.message, true); continue; }
          const delta = chunk.choices[0].delta || {};
          if (delta.content) { if (first === null) first = performance.now(); content += delta.content; $("answer").textContent = content; $("answer").dataset.pieces = String(++pieces); }
          if (chunk.agentrag) extra = chunk.agentrag;
        }
      }
      const total = performance.now() - started;
      if (extra) {
        const answerOnly = content.split("\n\nSources:\n")[0];
        renderAnswer(answerOnly, extra.supporting_spans || []);
        renderChunks(extra.proof.chunks || [], extra.supporting_spans || []);
        $("proof").textContent = JSON.stringify(extra.proof, null, 2);
        explain(extra, answerOnly);
        state.history.push({ role: "user", content: question }, { role: "assistant", content: answerOnly });
        $("timings").textContent = "first token " + (first === null ? "-" : Math.round(first - started) + " ms") + " · total " + Math.round(total) + " ms" +
          (typeof extra.confidence === "number" ? " · confidence " + extra.confidence.toFixed(2) : "") +
          (extra.question && extra.question !== question ? " · searched for: " + extra.question : "");
      }
      status("Done.");
    } catch (e) { status("Request failed: " + e, true); }
    finally { busy(false); }
  }

  async function search() {
    const question = $("question").value.trim();
    const who = tenant();
    if (!question) { status("Type a question.", true); return; }
    if (!who) { status("The token names no tenant (claim " + state.tenantClaim + ").", true); return; }
    const body = { query_text: question, top_k: topK(), mode: $("mode").value };
    const names = selectedCollections(); if (names.length) body.collections = names;
    const f = filters(); if (f) body.filters = f;
    busy(true); notice(""); $("answer").textContent = ""; status("Searching…");
    const started = performance.now();
    try {
      const response = await fetch("/api/v1/query/" + encodeURIComponent(who) + "/search", { method: "POST", headers: headers(), body: JSON.stringify(body) });
      if (!response.ok) { status(await errorText(response), true); return; }
      const proof = await response.json();
      renderChunks(proof.chunks, []);
      $("proof").textContent = JSON.stringify(proof, null, 2);
      if (!proof.chunks.length) notice("Nothing was retrieved: widen the collections or the filters, or ingest documents.");
      $("timings").textContent = "total " + Math.round(performance.now() - started) + " ms";
      status(proof.chunks.length + " passage(s).");
    } catch (e) { status("Request failed: " + e, true); }
    finally { busy(false); }
  }

  document.addEventListener("DOMContentLoaded", async () => {
    $("connect").addEventListener("click", connect);
    $("ask").addEventListener("click", ask);
    $("search").addEventListener("click", search);
    $("clear").addEventListener("click", () => { state.history = []; $("answer").textContent = ""; $("chunks").textContent = ""; notice(""); status("New conversation."); });
    $("question").addEventListener("keydown", (e) => { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); if (!state.busy) ask(); } });
    try { const config = await (await fetch("/playground.json")).json(); state.tenantClaim = config.tenant_claim || "tenant_id"; } catch (e) { /* defaults */ }
  });
})();
