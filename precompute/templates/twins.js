// The toy lab's twins in the browser: byte-level BPE, a Llama forward pass (RMSNorm, RoPE,
// SwiGLU, causal attention), the tuned and the logit lens, and the trajectory rows in the shape
// `python -m precompute trajectory` prints. Plain JavaScript, no module system, no network: the
// static site's text page loads it with a classic <script>, and tests/test_text_page.py runs it
// in Node against the Python answers. Numbers are computed in float64 from float32 weights.
(function (root) {
  "use strict";

  // -- safetensors ---------------------------------------------------------------------------
  function fromBase64(parts) {
    const text = parts.join("");
    if (typeof atob === "function") {
      const bin = atob(text);
      const out = new Uint8Array(bin.length);
      for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
      return out;
    }
    return new Uint8Array(Buffer.from(text, "base64"));
  }

  function readSafetensors(bytes) {
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const n = Number(view.getBigUint64(0, true));
    const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + n)));
    const tensors = {};
    for (const [name, info] of Object.entries(header)) {
      if (name === "__metadata__") continue;
      if (info.dtype !== "F32") throw new Error(name + ": only float32 tensors are read, not " + info.dtype);
      const [a, b] = info.data_offsets;
      const copy = bytes.slice(8 + n + a, 8 + n + b);  // aligned for Float32Array
      tensors[name] = { shape: info.shape, data: new Float32Array(copy.buffer) };
    }
    return { tensors, metadata: header.__metadata__ || {} };
  }

  // -- byte-level BPE ------------------------------------------------------------------------
  function byteChars() {  // GPT-2's printable stand-in for each byte
    const keep = [];
    for (let b = 33; b <= 126; b++) keep.push(b);
    for (let b = 161; b <= 172; b++) keep.push(b);
    for (let b = 174; b <= 255; b++) keep.push(b);
    const chars = new Array(256);
    let extra = 0;
    for (let b = 0; b < 256; b++) chars[b] = keep.includes(b) ? String.fromCharCode(b) : String.fromCharCode(256 + extra++);
    return chars;
  }
  const PRETOKEN = /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu;

  function Tokenizer(spec) {  // spec: {vocab: {token: id}, merges: [[a, b], ...], special: {content: id}}
    this.vocab = spec.vocab;
    this.ids = [];
    for (const [t, i] of Object.entries(spec.vocab)) this.ids[i] = t;
    for (const [t, i] of Object.entries(spec.special || {})) this.ids[i] = t;
    this.special = spec.special || {};
    this.rank = new Map(spec.merges.map((m, i) => [m[0] + " " + m[1], i]));
    this.chars = byteChars();
    this.bytes = new Map(this.chars.map((c, b) => [c, b]));
    this.cache = new Map();
  }
  Tokenizer.prototype.bpe = function (word) {
    if (this.cache.has(word)) return this.cache.get(word);
    let parts = Array.from(word);
    while (parts.length > 1) {
      let best = -1, bestRank = Infinity;
      for (let i = 0; i < parts.length - 1; i++) {
        const r = this.rank.get(parts[i] + " " + parts[i + 1]);
        if (r !== undefined && r < bestRank) { bestRank = r; best = i; }
      }
      if (best < 0) break;
      const a = parts[best], b = parts[best + 1], merged = [];
      for (let i = 0; i < parts.length; i++) {
        if (i < parts.length - 1 && parts[i] === a && parts[i + 1] === b) { merged.push(a + b); i++; }
        else merged.push(parts[i]);
      }
      parts = merged;
    }
    const ids = parts.map((p) => {
      const id = this.vocab[p];
      if (id === undefined) throw new Error("no vocabulary entry for " + JSON.stringify(p));
      return id;
    });
    this.cache.set(word, ids);
    return ids;
  };
  const WORD_CAP = 2048;  // a longer word is cut: its first 2,048 bytes give more tokens than the twins read
  // encode(text): every id; encode(text, limit): the first `limit` ids, each word cut to WORD_CAP bytes,
  // so that a 300,000-letter word costs what a short one does (BPE is quadratic in a word's length).
  Tokenizer.prototype.encode = function (text, limit) {
    const out = [];
    const max = limit || Infinity;
    const specials = Object.keys(this.special);
    let rest = text;
    while (rest.length) {
      let at = -1, which = null;
      for (const s of specials) {
        const i = rest.indexOf(s);
        if (i >= 0 && (at < 0 || i < at)) { at = i; which = s; }
      }
      const plain = at < 0 ? rest : rest.slice(0, at);
      for (const m of plain.matchAll(PRETOKEN)) {
        let bytes = new TextEncoder().encode(m[0]);
        if (limit && bytes.length > WORD_CAP) bytes = bytes.subarray(0, WORD_CAP);
        const mapped = Array.from(bytes, (b) => this.chars[b]).join("");
        for (const id of this.bpe(mapped)) {  // one at a time: a spread of a long word's ids overflows the stack
          out.push(id);
          if (out.length >= max) return out;
        }
      }
      if (at < 0) break;
      out.push(this.special[which]);
      if (out.length >= max) return out;
      rest = rest.slice(at + which.length);
    }
    return out;
  };
  Tokenizer.prototype.decode = function (id) {
    const t = this.ids[id];
    if (t === undefined) return "";
    if (Object.prototype.hasOwnProperty.call(this.special, t)) return t;
    const bytes = Uint8Array.from(Array.from(t), (c) => this.bytes.get(c));
    return new TextDecoder("utf-8", { fatal: false }).decode(bytes);
  };

  Tokenizer.prototype.idOf = function (text) {  // the first id that decodes to exactly this text, or -1
    if (!this.byText) {
      this.byText = new Map();
      for (let i = this.ids.length - 1; i >= 0; i--) if (this.ids[i] !== undefined) this.byText.set(this.decode(i), i);
    }
    const id = this.byText.get(text);
    return id === undefined ? -1 : id;
  };

  // -- the model -------------------------------------------------------------------------------
  function matvec(w, rows, cols, x, out) {  // out[r] = sum_c w[r, c] x[c]
    for (let r = 0; r < rows; r++) {
      let s = 0, o = r * cols;
      for (let c = 0; c < cols; c++) s += w[o + c] * x[c];
      out[r] = s;
    }
    return out;
  }

  function rmsnorm(x, weight, eps) {
    let ss = 0;
    for (let i = 0; i < x.length; i++) ss += x[i] * x[i];
    const scale = 1 / Math.sqrt(ss / x.length + eps);
    const out = new Float64Array(x.length);
    for (let i = 0; i < x.length; i++) out[i] = weight[i] * (x[i] * scale);
    return out;
  }

  function Model(config, tensors) {
    this.c = config;
    this.t = tensors;
    const w = (name) => { const t = tensors[name]; if (!t) throw new Error("missing tensor " + name); return t.data; };
    this.w = w;
    this.embed = w("model.embed_tokens.weight");
    this.unembed = tensors["lm_head.weight"] ? w("lm_head.weight") : this.embed;  // tied: one matrix
    this.norm = w("model.norm.weight");
  }
  Model.prototype.headDim = function () {
    return this.c.head_dim || this.c.hidden_size / this.c.num_attention_heads;
  };
  // hidden states before the final norm: [n_layers + 1][positions][d]
  Model.prototype.hidden = function (ids) {
    const c = this.c, d = c.hidden_size, H = c.num_attention_heads, KV = c.num_key_value_heads || H;
    const hd = this.headDim(), eps = c.rms_norm_eps, ff = c.intermediate_size, T = ids.length;
    const theta = (c.rope_parameters && c.rope_parameters.rope_theta) || c.rope_theta || 10000;
    const half = hd / 2, cos = [], sin = [];
    for (let p = 0; p < T; p++) {
      cos.push(new Float64Array(hd)); sin.push(new Float64Array(hd));
      for (let i = 0; i < half; i++) {
        const invFreq = Math.fround(1 / Math.pow(theta, (2 * i) / hd));
        const a = Math.fround(p * invFreq);
        cos[p][i] = cos[p][i + half] = Math.cos(a);
        sin[p][i] = sin[p][i + half] = Math.sin(a);
      }
    }
    const rope = (v, p) => {  // v: one head's vector, rotate_half convention
      const out = new Float64Array(hd);
      for (let i = 0; i < hd; i++) {
        const rot = i < half ? -v[i + half] : v[i - half];
        out[i] = v[i] * cos[p][i] + rot * sin[p][i];
      }
      return out;
    };
    let x = ids.map((id) => Float64Array.from(this.embed.subarray(id * d, (id + 1) * d)));
    const states = [x.map((v) => Float64Array.from(v))];
    for (let l = 0; l < c.num_hidden_layers; l++) {
      const pre = "model.layers." + l + ".";
      const wq = this.w(pre + "self_attn.q_proj.weight"), wk = this.w(pre + "self_attn.k_proj.weight");
      const wv = this.w(pre + "self_attn.v_proj.weight"), wo = this.w(pre + "self_attn.o_proj.weight");
      const q = [], k = [], v = [];
      for (let p = 0; p < T; p++) {
        const h = rmsnorm(x[p], this.w(pre + "input_layernorm.weight"), eps);
        const qp = matvec(wq, H * hd, d, h, new Float64Array(H * hd));
        const kp = matvec(wk, KV * hd, d, h, new Float64Array(KV * hd));
        q.push(Array.from({ length: H }, (_, i) => rope(qp.subarray(i * hd, (i + 1) * hd), p)));
        k.push(Array.from({ length: KV }, (_, i) => rope(kp.subarray(i * hd, (i + 1) * hd), p)));
        v.push(matvec(wv, KV * hd, d, h, new Float64Array(KV * hd)));
      }
      const scale = 1 / Math.sqrt(hd), next = [];
      for (let p = 0; p < T; p++) {
        const att = new Float64Array(H * hd);
        for (let i = 0; i < H; i++) {
          const g = Math.floor(i / (H / KV)), s = new Float64Array(p + 1);
          let m = -Infinity;
          for (let j = 0; j <= p; j++) {
            let dot = 0;
            for (let e = 0; e < hd; e++) dot += q[p][i][e] * k[j][g][e];
            s[j] = dot * scale; if (s[j] > m) m = s[j];
          }
          let z = 0;
          for (let j = 0; j <= p; j++) { s[j] = Math.exp(s[j] - m); z += s[j]; }
          for (let j = 0; j <= p; j++) {
            const a = s[j] / z, vj = v[j];
            for (let e = 0; e < hd; e++) att[i * hd + e] += a * vj[g * hd + e];
          }
        }
        const o = matvec(wo, d, H * hd, att, new Float64Array(d));
        const y = new Float64Array(d);
        for (let e = 0; e < d; e++) y[e] = x[p][e] + o[e];
        const h = rmsnorm(y, this.w(pre + "post_attention_layernorm.weight"), eps);
        const gate = matvec(this.w(pre + "mlp.gate_proj.weight"), ff, d, h, new Float64Array(ff));
        const up = matvec(this.w(pre + "mlp.up_proj.weight"), ff, d, h, new Float64Array(ff));
        for (let f = 0; f < ff; f++) gate[f] = (gate[f] / (1 + Math.exp(-gate[f]))) * up[f];
        const down = matvec(this.w(pre + "mlp.down_proj.weight"), d, ff, gate, new Float64Array(d));
        for (let e = 0; e < d; e++) y[e] += down[e];
        next.push(y);
      }
      x = next;
      states.push(x.map((vv) => Float64Array.from(vv)));
    }
    return states;
  };
  // probabilities over the vocabulary read from hidden state h (already translated by a lens)
  Model.prototype.readOut = function (h) {
    const c = this.c, d = c.hidden_size, V = c.vocab_size;
    const n = rmsnorm(h, this.norm, c.rms_norm_eps);
    const logits = matvec(this.unembed, V, d, n, new Float64Array(V));
    let m = -Infinity;
    for (let i = 0; i < V; i++) if (logits[i] > m) m = logits[i];
    let z = 0;
    for (let i = 0; i < V; i++) { logits[i] = Math.exp(logits[i] - m); z += logits[i]; }
    for (let i = 0; i < V; i++) logits[i] /= z;
    return logits;
  };

  function TunedLens(tensors, d) {  // h -> h + W h + b, one translator per hidden state
    this.d = d;
    this.t = tensors;
  }
  TunedLens.prototype.apply = function (h, layer) {
    const w = this.t["translators." + layer + ".weight"], b = this.t["translators." + layer + ".bias"];
    if (!w) return h;  // no translator: the identity
    const out = matvec(w.data, this.d, this.d, h, new Float64Array(this.d));
    for (let e = 0; e < this.d; e++) out[e] += h[e] + b.data[e];
    return out;
  };

  function topK(p, k) {
    const idx = [];
    for (let i = 0; i < p.length; i++) {
      if (idx.length < k || p[i] > p[idx[idx.length - 1]]) {
        idx.push(i);
        idx.sort((a, b) => p[b] - p[a] || a - b);
        if (idx.length > k) idx.pop();
      }
    }
    return idx;
  }

  function klBits(final, q) {  // KL(final || q) in bits
    let s = 0;
    for (let i = 0; i < final.length; i++) if (final[i] > 0) s += final[i] * Math.log(final[i] / q[i]);
    return s / Math.LN2;
  }

  // One model's rows: {model, lens, layer, position, token, rank, prediction, prob}, and the KL
  // per layer and lens (the mean over positions of KL(final || lens)).
  // pins: {text: token id}: each one's probability at every cell from the whole softmax, in `pinned`
  function trajectory(role, model, tokenizer, lens, ids, topk, pins) {
    const states = model.hidden(ids), rows = [], kl = [], pinned = [];
    const last = states.length - 1;
    const finals = states[last].map((h) => model.readOut(h));
    const lenses = lens ? ["tuned", "logit"] : ["logit"];
    const tokens = ids.map((i) => tokenizer.decode(i));
    for (const name of lenses) {
      for (let layer = 0; layer <= last; layer++) {
        let klSum = 0;
        for (let p = 0; p < ids.length; p++) {
          const h = name === "tuned" ? lens.apply(states[layer][p], layer) : states[layer][p];
          const probs = model.readOut(h);
          klSum += klBits(finals[p], probs);
          topK(probs, topk).forEach((id, r) => rows.push({
            model: role, lens: name, layer, position: p, token: tokens[p], rank: r + 1,
            prediction: tokenizer.decode(id), prob: probs[id],
          }));
          for (const [pin, id] of Object.entries(pins || {})) {
            pinned.push({ model: role, lens: name, layer, position: p, pin, prob: probs[id] });
          }
        }
        kl.push({ model: role, lens: name, layer, kl_bits: klSum / ids.length });
      }
    }
    return { rows, kl, pinned };
  }

  root.Twins = { fromBase64, readSafetensors, Tokenizer, Model, TunedLens, trajectory, topK, klBits };
  if (typeof module !== "undefined" && module.exports) module.exports = root.Twins;
})(typeof window !== "undefined" ? window : globalThis);
