// The report's item list (report/item_data.py packs it): decode the embedded items (gzip + base64 + JSON, the
// browser's own DecompressionStream: no library, no network), render one page of rows at a time with search,
// filters and paging, and build an item's drill-down only when its row is opened. Every string from a golden
// set, a pipeline or a judge goes in as text (text nodes), never as markup.
(function () {
  "use strict";
  var PAGE = 100;
  var table = document.getElementById("items-table");
  var rowsSource = document.getElementById("items-rows"), detailSource = document.getElementById("items-detail");
  var status = document.getElementById("items-status");
  if (!table || !rowsSource || !detailSource) { return; }
  // doc: the drill-downs (null until their block is decoded, after the rows are drawn).
  var doc = null, rows = null, view = [], start = 0, haystack = null;

  function el(tag, attrs) {
    var node = document.createElement(tag);
    if (attrs) {
      for (var name in attrs) {
        if (attrs[name] !== null && attrs[name] !== undefined) { node.setAttribute(name, attrs[name]); }
      }
    }
    for (var i = 2; i < arguments.length; i++) { add(node, arguments[i]); }
    return node;
  }
  function add(node, child) {
    if (child === null || child === undefined || child === false) { return; }
    if (Array.isArray(child)) { child.forEach(function (c) { add(node, c); }); return; }
    node.appendChild(typeof child === "object" ? child : document.createTextNode(String(child)));
  }
  function num(value, places) {
    if (value === null || value === undefined) { return "–"; }
    if (typeof value === "boolean") { return value ? "yes" : "no"; }
    return Number(value).toFixed(places === undefined ? 4 : places);
  }
  function flag(value) {
    if (value === null || value === undefined) { return el("span", {"class": "ns"}, "–"); }
    return value ? el("span", {"class": "yes"}, "yes") : el("span", {"class": "no"}, "no");
  }
  function str(value) { return value === null || value === undefined ? "" : String(value); }
  function json(value) { return typeof value === "string" ? value : JSON.stringify(value); }

  function row(i) {
    var r = rows, id = r.id[i];
    var details = el("details", {"class": "item", "id": "item-" + id, "data-item": id}, el("summary", null, id));
    details.addEventListener("click", function () { open(i, tbody); });
    details.addEventListener("toggle", function () { if (details.open) { open(i, tbody); } });
    var tbody = el("tbody", {"class": "item-group", "data-index": String(i)},
      el("tr", {"class": "row"},
        el("td", {"class": "mono id"}, details),
        el("td", {"class": "outcome-" + str(r.outcome[i])}, str(r.outcome[i])),
        el("td", null, r.error_class[i] || "–"),
        el("td", null, r.crag_grade[i] || "–", r.abstained[i] ? [" ", el("span", {"class": "badge"}, "abstained")] : null),
        el("td", {"class": "num"}, num(r.confidence[i], 2)),
        el("td", {"class": "num"}, num(r.ndcg[i], 3)),
        el("td", {"class": "num"}, num(r.truthfulness[i], 2)),
        el("td", {"class": "q"}, el("div", {"class": "clamp"}, str(r.question[i])))));
    if (r.blocked[i] !== null && r.blocked[i] !== undefined) { tbody.setAttribute("data-blocked", r.blocked[i]); }
    return tbody;
  }

  function open(i, tbody) {
    if (doc === null || tbody.querySelector("tr.more")) { return; }  // built when the drill-downs arrive
    tbody.appendChild(el("tr", {"class": "more"}, el("td", {"colspan": "8"}, drill(i))));
  }

  function section(title) { return el("h4", null, title); }
  function list(title, values, css) {
    if (!values || !values.length) { return null; }
    return [section(title), el("ul", null, values.map(function (v) { return el("li", css ? {"class": css} : null, json(v)); }))];
  }

  function drill(i) {
    var d = doc.detail[i] || {}, r = rows, body = el("div", {"class": "body"});
    add(body, [section("question"), el("div", {"class": "question"}, str(r.question[i]))]);
    var facets = d.facets || [], tags = d.tags || [];
    if (facets.length || tags.length) {
      add(body, el("p", null, facets.map(function (f) { return [el("span", {"class": "badge"}, f[0] + "=" + json(f[1])), " "]; }),
                   tags.map(function (t) { return [el("span", {"class": "badge"}, t), " "]; })));
    }
    add(body, section("answer"));
    if (d.attack) {
      add(body, el("p", null, el("span", {"class": "badge"}, "attack: " + str(d.attack.category)), " via " + (d.attack.vector || "question") +
                   "; expected ", el("b", null, str(d.expect))));
      if (d.attack.document) { add(body, [section("planted document"), el("pre", null, str(d.attack.document))]); }
    }
    if (d.blocked) {
      add(body, el("p", {"class": "regressed", "data-blocked": d.blocked_layer || ""}, "blocked by " + (d.blocked_layer || "a guardrail") + ": no answer"));
    } else if (d.answer !== undefined) {
      add(body, el("div", {"class": "answer"}, d.answer));
    } else {
      add(body, el("p", {"class": "ns"}, "no answer (component mode)"));
    }
    if (d.reference) { add(body, [section("reference answer"), el("div", {"class": "answer"}, json(d.reference))]); }
    if (d.error_evidence) { add(body, el("p", null, el("b", null, str(r.error_class[i])), ": " + d.error_evidence)); }
    if (d.retention) {
      var retention = el("div", {"class": "retention"});
      (d.retention.contradicted || []).forEach(function (s) {
        add(retention, el("p", {"class": "regressed"}, "contradicts the user's earlier message: “" + s + "”"));
      });
      if (d.retention.reason) { add(retention, el("p", null, d.retention.reason)); }
      add(body, [section("knowledge retention"), retention]);
    }
    if (d.error) { add(body, [section("error"), el("pre", null, d.error)]); }
    add(body, list("failures", d.failures));
    add(body, list("judge errors", d.judge_errors, "regressed"));
    add(body, list("custom metric errors", d.metric_errors, "regressed"));
    if (d.repeats && d.repeats.length) {
      add(body, [section("repeats (" + d.repeats.length + "; the item's values are their means)"),
        el("table", null, el("tr", null, el("th", null, "#"), el("th", null, "outcome"), el("th", null, "answer"), el("th", null, "metrics")),
          d.repeats.map(function (rp) {
            return el("tr", null, el("td", null, String(rp.repeat + 1)), el("td", {"class": rp.outcome !== "passed" ? "regressed" : ""}, str(rp.outcome)),
              el("td", null, str(rp.answer), rp.failure ? [el("br"), el("small", null, rp.failure)] : null, rp.error ? [el("br"), el("small", null, rp.error)] : null),
              el("td", null, (rp.metrics || []).map(function (m) { return m.label + " " + num(m.value, 3); }).join(", ")));
          }))]);
    }
    if (d.rubrics && d.rubrics.length) {
      add(body, [section("rubric verdicts"), el("ul", null, d.rubrics.map(function (rb) {
        return el("li", null, el("b", null, str(rb.name)), ": score " + str(rb.score) + " (" + str(rb.reason) + ")");
      }))]);
    }
    if (d.tools) { add(body, tools(d.tools)); }
    var chunks = d.chunks || [];
    add(body, section("retrieved chunks (" + chunks.length + ")"));
    if (chunks.length) {
      add(body, el("div", {"class": "scroll"}, el("table", {"class": "chunks"},
        el("tr", null, ["rank", "chunk", "doc", "score", "grade", "source", "useful", "cited", "text"].map(function (h, k) {
          return el("th", [0, 3, 4].indexOf(k) >= 0 ? {"class": "num"} : null, h);
        })),
        chunks.map(function (c, k) {
          var chunk = doc.chunks[c[0]], source = typeof c[3] === "number" ? doc.sources[c[3]] : c[3];
          return el("tr", null, el("td", {"class": "num"}, String(k + 1)), el("td", {"class": "mono"}, chunk[0] || "–"),
            el("td", {"class": "mono"}, chunk[1] || "–"), el("td", {"class": "num"}, num(c[1], 3)),
            el("td", {"class": "num"}, c[2] === null || c[2] === undefined ? "–" : String(c[2])), el("td", null, str(source)),
            el("td", null, flag(c[4])), el("td", null, c[5] ? "yes" : ""), el("td", {"class": "excerpt"}, str(chunk[2])));
        }))));
    } else {
      add(body, el("p", {"class": "ns"}, "nothing retrieved"));
    }
    if (d.correctness) {
      add(body, [section("correctness"), el("p", null, el("b", null, str(d.correctness.grade)), d.correctness.reason ? ": " + d.correctness.reason : "")]);
    }
    if (d.claims && d.claims.length) {
      add(body, [section("faithfulness: answer claims"), el("table", {"class": "claims"},
        el("tr", null, el("th", null, "claim"), el("th", null, "supported"), el("th", null, "reason")),
        d.claims.map(function (c) { return el("tr", null, el("td", null, str(c.text)), el("td", null, flag(c.supported)), el("td", null, str(c.reason))); }))]);
    }
    if (d.reference_claims && d.reference_claims.length) {
      add(body, [section("context recall: reference claims"), el("table", null,
        el("tr", null, el("th", null, "claim"), el("th", null, "attributed to the context")),
        d.reference_claims.map(function (c) { return el("tr", null, el("td", null, str(c.text)), el("td", null, flag(c.attributed))); }))]);
    }
    if (d.useful && d.useful.length) {
      add(body, [section("context precision: useful by rank"), el("p", null, d.useful.map(function (u, k) {
        return [el("span", {"class": "badge"}, (k + 1) + ": ", flag(u)), " "];
      }))]);
    }
    if (d.questions && d.questions.length) {
      add(body, [section("response relevancy: generated questions"), el("table", null,
        el("tr", null, el("th", null, "question"), el("th", null, "noncommittal")),
        d.questions.map(function (q) { return el("tr", null, el("td", null, str(q.text)), el("td", null, flag(q.noncommittal))); }))]);
    }
    if (d.assertions && d.assertions.length) {
      add(body, [section("assertions"), el("table", {"class": "assertions"},
        el("tr", null, ["assertion", "kind", "weight", "concept", "concept detected", "supported", "satisfied"].map(function (h) {
          return el("th", h === "weight" ? {"class": "num"} : null, h);
        })),
        d.assertions.map(function (a) {
          return el("tr", null, el("td", null, str(a.text)), el("td", null, str(a.kind)), el("td", {"class": "num"}, num(a.weight, 2)),
            el("td", {"class": "mono"}, str(a.conceptId)), el("td", null, flag(a.conceptDetected)), el("td", null, flag(a.supported)),
            el("td", null, flag(a.satisfied)));
        }))]);
    }
    var metrics = [];
    doc.metrics.labels.forEach(function (label, m) {
      var v = doc.metrics.values[m][i];
      if (v !== null && v !== undefined) { metrics.push(el("tr", null, el("td", null, str(label)), el("td", {"class": "num"}, num(v)))); }
    });
    if (metrics.length) { add(body, [section("metrics"), el("table", {"class": "item-metrics"}, metrics)]); }
    if (d.latency_ms !== undefined) { add(body, el("p", {"class": "ns"}, "latency " + num(d.latency_ms, 1) + " ms")); }
    return body;
  }

  function tools(t) {
    var title = t.toolMatch ? "toolMatch " + t.toolMatch + ": " + t.expected + " expected, " + t.made + " made"
      : t.made + " made; the item has no expectedTools, so they are not checked";
    return [section("tool calls (" + title + ")"), el("div", {"class": "scroll"}, el("table", {"class": "tools"},
      el("tr", null, el("th", null, "status"), el("th", null, "expected"), el("th", {"class": "num"}, "#"), el("th", null, "made"), el("th", null, "differences")),
      (t.rows || []).map(function (tr) {
        var css = tr.status === "made" ? "ns" : tr.status === "match" ? "improved" : "regressed";
        return el("tr", {"class": "tool", "data-status": tr.status}, el("td", {"class": css}, str(tr.label)),
          el("td", {"class": "mono"}, tr.expected || "–"), el("td", {"class": "num"}, tr.position ? String(tr.position) : "–"),
          el("td", {"class": "mono"}, tr.made || "(not called)"),
          el("td", null, (tr.differences || []).map(function (x) { return el("div", {"class": "difference"}, x); })));
      })))];
  }

  function value(id) { var node = document.getElementById(id); return node ? node.value : ""; }

  function filter() {
    var text = value("items-search").trim().toLowerCase(), outcome = value("items-outcome"), cls = value("items-class"), kind = value("items-kind");
    if (text && haystack === null) {  // the answers join the search once the drill-downs are decoded
      haystack = rows.id.map(function (id, i) {
        return (id + "\n" + str(rows.question[i]) + "\n" + (doc ? str((doc.detail[i] || {}).answer) : "")).toLowerCase();
      });
    }
    view = [];
    for (var i = 0; i < rows.id.length; i++) {
      if (outcome && rows.outcome[i] !== outcome) { continue; }
      if (cls && rows.error_class[i] !== cls) { continue; }
      if (kind && rows.kind[i] !== kind) { continue; }
      if (text && haystack[i].indexOf(text) < 0) { continue; }
      view.push(i);
    }
    start = 0;
    render();
  }

  function render() {
    Array.prototype.slice.call(table.tBodies).forEach(function (tbody) { table.removeChild(tbody); });
    var shown = view.slice(start, start + PAGE), fragment = document.createDocumentFragment();
    shown.forEach(function (i) { fragment.appendChild(row(i)); });
    table.appendChild(fragment);
    status.textContent = view.length ? "items " + (start + 1) + "–" + (start + shown.length) + " of " + view.length +
      (view.length < rows.id.length ? " matching (" + rows.id.length + " in the run)" : "") : "no item matches";
    document.getElementById("items-prev").disabled = start === 0;
    document.getElementById("items-next").disabled = start + PAGE >= view.length;
  }

  function reveal(id) {
    // #item-ID in the address: show the page that holds it, opened.
    var at = rows.id.indexOf(id);
    if (at < 0) { return; }
    var k = view.indexOf(at);
    if (k < 0) { document.getElementById("items-search").value = id; filter(); k = view.indexOf(at); }
    start = Math.floor(k / PAGE) * PAGE;
    render();
    var details = document.getElementById("item-" + id);
    if (details) { details.open = true; open(at, details.closest("tbody")); details.scrollIntoView(); }
  }

  function drawn(decoded) {
    rows = decoded.rows;
    view = rows.id.map(function (_, i) { return i; });
    render();
    table.setAttribute("data-rows-ready", "true");
    var search = document.getElementById("items-search"), timer = null;
    search.addEventListener("input", function () { clearTimeout(timer); timer = setTimeout(filter, 150); });
    ["items-outcome", "items-class", "items-kind"].forEach(function (id) {
      var node = document.getElementById(id);
      if (node) { node.addEventListener("change", filter); }
    });
    document.getElementById("items-prev").addEventListener("click", function () { start = Math.max(0, start - PAGE); render(); });
    document.getElementById("items-next").addEventListener("click", function () { if (start + PAGE < view.length) { start += PAGE; render(); } });
  }

  function ready(decoded) {
    doc = decoded;
    haystack = null;
    if (value("items-search").trim()) { filter(); }  // a search typed meanwhile now reads the answers too
    Array.prototype.slice.call(table.querySelectorAll("details.item[open]")).forEach(function (details) {
      var tbody = details.closest("tbody");
      open(Number(tbody.getAttribute("data-index")), tbody);
    });
    table.setAttribute("data-ready", "true");
    if (location.hash.indexOf("#item-") === 0) { reveal(decodeURIComponent(location.hash.slice(6))); }
  }

  function decode(source) {
    var text = source.textContent.trim(), bytes;
    if (typeof Uint8Array.fromBase64 === "function") {
      bytes = Uint8Array.fromBase64(text);  // native: much faster than the loop below on megabytes
    } else {
      var binary = atob(text);
      bytes = new Uint8Array(binary.length);
      for (var i = 0; i < binary.length; i++) { bytes[i] = binary.charCodeAt(i); }
    }
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Response(stream).text().then(JSON.parse);
  }

  try {
    decode(rowsSource).then(drawn).then(function () { return decode(detailSource); }).then(ready, function (error) {
      status.textContent = "the items could not be decoded: " + error;
    });
  } catch (error) {
    status.textContent = "the items could not be decoded (this browser lacks DecompressionStream?): " + error;
  }
})();
