//! The reports of a [`Comparison`]: a text table, JSON with everything (per-topic values and
//! differences included) and a self-contained HTML page with inline SVG plots (no script, no
//! external resource; every string from an input file escaped).

use std::fmt::Write as _;

use serde_json::{json, Map, Value};

use super::compare::{Comparison, MeasureComparison, PairComparison};

/// Short label of the run at `i`: A, B, … Z, then R27, R28, …
pub fn run_label(i: usize) -> String {
    if i < 26 {
        ((b'A' + i as u8) as char).to_string()
    } else {
        format!("R{}", i + 1)
    }
}

fn fmt_p(p: Option<f64>) -> String {
    match p {
        None => "n/a".into(),
        Some(p) if p != 0.0 && p < 1e-4 => format!("{p:.1e}"),
        Some(p) => format!("{p:.4}"),
    }
}

fn fmt_t(t: Option<f64>) -> String {
    t.map_or_else(|| "n/a".into(), |t| format!("{t:.3}"))
}

fn pair_name(p: &PairComparison) -> String {
    format!("{} − {}", run_label(p.b), run_label(p.a))
}

const TOPIC_RULE: &str = "every judged topic; a topic missing from a run scores 0 (trec_eval -c)";
const RANDOMIZATION_RULE: &str = "two-sided, (count(|sum of signed differences| >= |observed|) + 1) / (N + 1) over N random sign flips; exact count / 2^m when the m non-zero differences have 2^m <= N sign assignments";

impl Comparison {
    /// The text table printed on standard output.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let t = &self.table;
        let _ = writeln!(
            out,
            "{} runs ({}), {} topics: {TOPIC_RULE}",
            t.runs.len(),
            t.kind.name(),
            t.topics.len()
        );
        for (i, r) in t.runs.iter().enumerate() {
            let _ = writeln!(
                out,
                "  {:<3} {}  (judged topics missing: {})",
                run_label(i),
                r.name,
                r.missing_topics
            );
        }
        let pairs = t.runs.len() * (t.runs.len() - 1) / 2;
        let _ = writeln!(
            out,
            "paired t-test; randomization test with {} sign flips, seed {}; Holm–Bonferroni over {pairs} pair{} per measure\n",
            self.options.permutations,
            self.options.seed,
            if pairs == 1 { "" } else { "s" }
        );
        let _ = write!(out, "{:<20}", "mean");
        for i in 0..t.runs.len() {
            let _ = write!(out, " {:>8}", run_label(i));
        }
        out.push('\n');
        for m in &self.measures {
            let _ = write!(out, "{:<20}", m.measure);
            for v in &m.means {
                let _ = write!(out, " {v:>8.4}");
            }
            out.push('\n');
        }
        out.push('\n');
        let _ = writeln!(
            out,
            "{:<20} {:<8} {:>8} {:>7} {:>8} {:>8} {:>8} {:>8} {:>10}",
            "measure", "pair", "delta", "t", "p(t)", "Holm", "p(rand)", "Holm", "W/T/L"
        );
        for m in &self.measures {
            for p in &m.pairs {
                let _ = writeln!(
                    out,
                    "{:<20} {:<8} {:>+8.4} {:>7} {:>8} {:>8} {:>8} {:>8} {:>10}",
                    m.measure,
                    pair_name(p),
                    p.mean_delta,
                    fmt_t(p.t_statistic),
                    fmt_p(p.t_test_p),
                    fmt_p(p.t_test_p_holm),
                    fmt_p(Some(p.randomization.p)),
                    fmt_p(Some(p.randomization_p_holm)),
                    format!("{}/{}/{}", p.wins, p.ties, p.losses)
                );
            }
        }
        if self.options.top > 0 {
            out.push_str("\nlargest differences per topic\n");
            for m in &self.measures {
                for p in &m.pairs {
                    let list: Vec<String> = p
                        .largest
                        .iter()
                        .map(|&i| format!("{} {:+.4}", t.topics[i], p.deltas[i]))
                        .collect();
                    let _ = writeln!(
                        out,
                        "{:<20} {:<8} {}",
                        m.measure,
                        pair_name(p),
                        if list.is_empty() {
                            "(none)".to_string()
                        } else {
                            list.join(", ")
                        }
                    );
                }
            }
        }
        out
    }

    /// Everything, at full precision (`--json`).
    pub fn to_json(&self) -> Value {
        let t = &self.table;
        let names = self.run_names();
        let runs: Vec<Value> = t
            .runs
            .iter()
            .enumerate()
            .map(|(i, r)| json!({"label": run_label(i), "name": r.name, "missing_topics": r.missing_topics}))
            .collect();
        let measures: Vec<Value> = self
            .measures
            .iter()
            .enumerate()
            .map(|(mi, m)| self.measure_json(mi, m, &names))
            .collect();
        json!({
            "kind": t.kind.name(),
            "topics": t.topics,
            "topic_rule": TOPIC_RULE,
            "runs": runs,
            "direction": "per pair, deltas are b - a; wins/ties/losses count topics where b is above/equal to/below a",
            "t_test": "paired, two-sided (scipy.stats.ttest_rel(b, a)); null when undefined",
            "randomization": {"permutations": self.options.permutations, "seed": self.options.seed, "rule": RANDOMIZATION_RULE},
            "correction": "holm, per measure and test, over all pairs",
            "measures": measures,
        })
    }

    fn measure_json(&self, mi: usize, m: &MeasureComparison, names: &[&str]) -> Value {
        let t = &self.table;
        let per_topic = |values: &[f64]| -> Map<String, Value> {
            t.topics
                .iter()
                .zip(values)
                .map(|(q, v)| (q.clone(), json!(v)))
                .collect()
        };
        let means: Map<String, Value> = names
            .iter()
            .zip(&m.means)
            .map(|(n, v)| (n.to_string(), json!(v)))
            .collect();
        let values: Map<String, Value> = t
            .runs
            .iter()
            .map(|r| (r.name.clone(), Value::Object(per_topic(&r.values[mi]))))
            .collect();
        let pairs: Vec<Value> = m
            .pairs
            .iter()
            .map(|p| {
                json!({
                    "a": names[p.a],
                    "b": names[p.b],
                    "mean_delta": p.mean_delta,
                    "t_statistic": p.t_statistic,
                    "df": t.topics.len().saturating_sub(1),
                    "t_test_p": p.t_test_p,
                    "t_test_p_holm": p.t_test_p_holm,
                    "randomization_p": p.randomization.p,
                    "randomization_p_holm": p.randomization_p_holm,
                    "randomization_exact": p.randomization.exact,
                    "randomization_permutations": p.randomization.permutations,
                    "wins": p.wins,
                    "ties": p.ties,
                    "losses": p.losses,
                    "largest": p.largest.iter().map(|&i| json!({"topic": t.topics[i], "delta": p.deltas[i]})).collect::<Vec<_>>(),
                    "deltas": per_topic(&p.deltas),
                })
            })
            .collect();
        json!({"measure": m.measure, "means": means, "per_topic": values, "pairs": pairs})
    }

    /// One self-contained HTML page: the tables and, per measure, a box plot of each run's
    /// per-topic values and, per pair, the sorted per-topic differences.
    pub fn to_html(&self) -> String {
        let t = &self.table;
        let mut h = String::new();
        h.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
        let _ = writeln!(
            h,
            "<title>convrag run comparison ({})</title>",
            esc(t.kind.name())
        );
        h.push_str(STYLE);
        h.push_str("</head>\n<body>\n<h1>Run comparison</h1>\n");
        let _ = writeln!(
            h,
            "<p>{} runs ({}), {} topics: {}. Paired t-test (two-sided) and randomization test ({} sign flips, seed {}); Holm–Bonferroni over the pairs of each measure. Δ = B − A.</p>",
            t.runs.len(),
            esc(t.kind.name()),
            t.topics.len(),
            esc(TOPIC_RULE),
            self.options.permutations,
            self.options.seed
        );
        h.push_str("<table>\n<tr><th>run</th><th>file</th><th>judged topics missing</th>");
        for m in &self.measures {
            let _ = write!(h, "<th>{}</th>", esc(&m.measure));
        }
        h.push_str("</tr>\n");
        for (i, r) in t.runs.iter().enumerate() {
            let _ = write!(
                h,
                "<tr><td><b>{}</b></td><td class=\"name\">{}</td><td class=\"num\">{}</td>",
                run_label(i),
                esc(&r.name),
                r.missing_topics
            );
            for m in &self.measures {
                let _ = write!(h, "<td class=\"num\">{:.4}</td>", m.means[i]);
            }
            h.push_str("</tr>\n");
        }
        h.push_str("</table>\n<h2>Pairs</h2>\n<table>\n<tr><th>measure</th><th>pair</th><th>mean Δ</th><th>t</th><th>p (t-test)</th><th>Holm</th><th>p (randomization)</th><th>Holm</th><th>wins / ties / losses</th><th>largest |Δ|</th></tr>\n");
        for m in &self.measures {
            for p in &m.pairs {
                let sig =
                    p.t_test_p_holm.is_some_and(|v| v < 0.05) && p.randomization_p_holm < 0.05;
                let largest: Vec<String> = p
                    .largest
                    .iter()
                    .map(|&i| format!("{} ({:+.3})", esc(&t.topics[i]), p.deltas[i]))
                    .collect();
                let _ = writeln!(
                    h,
                    "<tr{}><td>{}</td><td class=\"pair\">{}</td><td class=\"num\">{:+.4}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{} / {} / {}</td><td class=\"topics\">{}</td></tr>",
                    if sig { " class=\"sig\"" } else { "" },
                    esc(&m.measure),
                    pair_name(p),
                    p.mean_delta,
                    fmt_t(p.t_statistic),
                    fmt_p(p.t_test_p),
                    fmt_p(p.t_test_p_holm),
                    fmt_p(Some(p.randomization.p)),
                    fmt_p(Some(p.randomization_p_holm)),
                    p.wins,
                    p.ties,
                    p.losses,
                    largest.join(", ")
                );
            }
        }
        h.push_str(
            "</table>\n<p class=\"note\">Shaded rows: both corrected p-values below 0.05.</p>\n",
        );
        for (mi, m) in self.measures.iter().enumerate() {
            let _ = writeln!(h, "<h2>{}</h2>\n<div class=\"plots\">", esc(&m.measure));
            let _ = writeln!(
                h,
                "<figure style=\"max-width: {}px\">{}<figcaption>Per-topic {} of each run (box: quartiles, whiskers: 1.5 IQR, ◆ mean)</figcaption></figure>",
                box_plot_width(t.runs.len()),
                box_plot(self, mi),
                esc(&m.measure)
            );
            for p in &m.pairs {
                let _ = writeln!(
                    h,
                    "<figure>{}<figcaption>{}: per-topic Δ {}, sorted ({} wins, {} ties, {} losses)</figcaption></figure>",
                    delta_bars(&t.topics, p),
                    pair_name(p),
                    esc(&m.measure),
                    p.wins,
                    p.ties,
                    p.losses
                );
            }
            h.push_str("</div>\n");
        }
        h.push_str("</body>\n</html>\n");
        h
    }
}

const STYLE: &str = "<style>
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #1a202c; max-width: 1400px; }
table { border-collapse: collapse; margin: 0.5em 0 1em; font-size: 14px; }
th, td { border: 1px solid #cbd5e0; padding: 3px 8px; text-align: left; }
th { background: #edf2f7; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.name { font-family: ui-monospace, monospace; font-size: 12px; word-break: break-all; }
td.topics { font-size: 12px; }
td.pair, td.num { white-space: nowrap; }
tr.sig { background: #ebf8ff; }
.plots { display: flex; flex-wrap: wrap; gap: 1em; }
figure { margin: 0; }
figcaption { font-size: 13px; color: #4a5568; max-width: 640px; }
.note { font-size: 13px; color: #4a5568; }
svg text { font-family: system-ui, sans-serif; font-size: 11px; fill: #2d3748; }
</style>
";

/// Escapes text for HTML element content and attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const PLOT_W: f64 = 640.0;
const PLOT_H: f64 = 220.0;
const MARGIN_L: f64 = 48.0;
const MARGIN_T: f64 = 10.0;
const MARGIN_B: f64 = 22.0;

/// Per-topic differences sorted from the largest gain to the largest loss.
fn delta_bars(topics: &[String], p: &PairComparison) -> String {
    let mut order: Vec<usize> = (0..p.deltas.len()).collect();
    order.sort_by(|&i, &j| p.deltas[j].total_cmp(&p.deltas[i]).then(i.cmp(&j)));
    let max = p
        .deltas
        .iter()
        .fold(0.0f64, |m, d| m.max(d.abs()))
        .max(1e-9);
    let inner_w = PLOT_W - MARGIN_L - 8.0;
    let inner_h = PLOT_H - MARGIN_T - MARGIN_B;
    let zero = MARGIN_T + inner_h / 2.0;
    let y = |v: f64| zero - v / max * inner_h / 2.0;
    let bar_w = inner_w / order.len().max(1) as f64;
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{PLOT_W}\" height=\"{PLOT_H}\" viewBox=\"0 0 {PLOT_W} {PLOT_H}\" role=\"img\">"
    );
    for v in [max, max / 2.0, 0.0, -max / 2.0, -max] {
        let _ = write!(
            s,
            "<line x1=\"{MARGIN_L}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"{}\" stroke-width=\"1\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{v:+.3}</text>",
            PLOT_W - 8.0,
            if v == 0.0 { "#4a5568" } else { "#e2e8f0" },
            MARGIN_L - 4.0,
            y(v) + 4.0,
            y = y(v)
        );
    }
    for (k, &i) in order.iter().enumerate() {
        let d = p.deltas[i];
        let (top, height) = if d >= 0.0 {
            (y(d), zero - y(d))
        } else {
            (zero, y(d) - zero)
        };
        let _ = write!(
            s,
            "<rect x=\"{:.2}\" y=\"{top:.2}\" width=\"{:.2}\" height=\"{:.2}\" fill=\"{}\"><title>{} {d:+.4}</title></rect>",
            MARGIN_L + k as f64 * bar_w,
            (bar_w * 0.85).max(0.5),
            height.max(if d == 0.0 { 0.0 } else { 0.5 }),
            if d >= 0.0 { "#2b6cb0" } else { "#c53030" },
            esc(&topics[i])
        );
    }
    let _ = write!(
        s,
        "<text x=\"{MARGIN_L}\" y=\"{}\">topics, sorted by Δ ({} topics)</text></svg>",
        PLOT_H - 6.0,
        order.len()
    );
    s
}

/// Linear-interpolation quantile (numpy's default) of sorted values.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let pos = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

fn box_plot_width(runs: usize) -> f64 {
    (MARGIN_L + 20.0 + 90.0 * runs as f64).max(240.0)
}

/// One box per run: quartiles, Tukey whiskers, outliers, the mean.
fn box_plot(c: &Comparison, mi: usize) -> String {
    let runs = &c.table.runs;
    let all = runs.iter().flat_map(|r| r.values[mi].iter().copied());
    let (lo, hi) = all.fold((0.0f64, 1.0f64), |(l, h), v| (l.min(v), h.max(v)));
    let inner_h = PLOT_H - MARGIN_T - MARGIN_B;
    let y = |v: f64| MARGIN_T + (hi - v) / (hi - lo).max(1e-12) * inner_h;
    let width = box_plot_width(runs.len());
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{PLOT_H}\" viewBox=\"0 0 {width} {PLOT_H}\" role=\"img\">"
    );
    for k in 0..=4 {
        let v = lo + (hi - lo) * k as f64 / 4.0;
        let _ = write!(
            s,
            "<line x1=\"{MARGIN_L}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#e2e8f0\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{v:.2}</text>",
            width - 8.0,
            MARGIN_L - 4.0,
            y(v) + 4.0,
            y = y(v)
        );
    }
    for (i, r) in runs.iter().enumerate() {
        let mut v = r.values[mi].clone();
        v.sort_by(f64::total_cmp);
        let (q1, med, q3) = (quantile(&v, 0.25), quantile(&v, 0.5), quantile(&v, 0.75));
        let iqr = q3 - q1;
        let low = v
            .iter()
            .copied()
            .find(|&x| x >= q1 - 1.5 * iqr)
            .unwrap_or(q1);
        let high = v
            .iter()
            .rev()
            .copied()
            .find(|&x| x <= q3 + 1.5 * iqr)
            .unwrap_or(q3);
        let cx = MARGIN_L + 20.0 + 90.0 * i as f64 + 30.0;
        let _ = write!(
            s,
            "<g><title>{}: median {med:.4}, quartiles {q1:.4}–{q3:.4}, mean {:.4}</title>\
             <line x1=\"{cx}\" x2=\"{cx}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#4a5568\"/>\
             <rect x=\"{:.1}\" y=\"{:.1}\" width=\"40\" height=\"{:.1}\" fill=\"#bee3f8\" stroke=\"#2c5282\"/>\
             <line x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#1a365d\" stroke-width=\"2\"/>",
            esc(&r.name),
            c.measures[mi].means[i],
            y(high),
            y(low),
            cx - 20.0,
            y(q3),
            (y(q1) - y(q3)).max(1.0),
            cx - 20.0,
            cx + 20.0,
            y(med),
            y(med)
        );
        for &x in v.iter().filter(|&&x| x < low || x > high) {
            let _ = write!(
                s,
                "<circle cx=\"{cx}\" cy=\"{:.1}\" r=\"2.5\" fill=\"none\" stroke=\"#4a5568\"/>",
                y(x)
            );
        }
        let my = y(c.measures[mi].means[i]);
        let _ = write!(
            s,
            "<path d=\"M{cx} {:.1} l5 5 l-5 5 l-5 -5 z\" fill=\"#dd6b20\"/></g><text x=\"{cx}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            my - 5.0,
            PLOT_H - 6.0,
            run_label(i)
        );
    }
    s.push_str("</svg>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::compare::{compare, CompareOptions, RougeMeasure, ScoreTable};
    use crate::eval::rewrite::Texts;

    fn texts(items: &[(&str, &str)]) -> Texts {
        items
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn html_escapes_names_and_topics() {
        let reference = texts(&[("1<b>_1", "yoga classes nearby"), ("1_2", "vegan recipes")]);
        let a = texts(&[("1<b>_1", "yoga"), ("1_2", "recipes")]);
        let b = texts(&[("1<b>_1", "yoga classes"), ("1_2", "vegan recipes")]);
        let runs = vec![
            ("a&\"x\".tsv".to_string(), a),
            ("<script>b</script>".to_string(), b),
        ];
        let table = ScoreTable::rewrite(&reference, &runs, &RougeMeasure::all(), false).unwrap();
        let c = compare(table, CompareOptions::default()).unwrap();
        let html = c.to_html();
        assert!(!html.contains("<script"), "{html}");
        assert!(html.contains("&lt;script&gt;b&lt;/script&gt;"));
        assert!(html.contains("a&amp;&quot;x&quot;.tsv"));
        assert!(html.contains("1&lt;b&gt;_1"));
        assert!(!html.contains("1<b>_1"));
        // Self-contained: nothing loaded from elsewhere.
        assert!(!html.contains("src=") && !html.contains("href=") && !html.contains("@import"));
        let text = c.to_text();
        assert!(text.contains("rouge1_recall"), "{text}");
    }

    #[test]
    fn quantiles_like_numpy() {
        let v = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(quantile(&v, 0.25), 1.75);
        assert_eq!(quantile(&v, 0.5), 2.5);
        assert_eq!(quantile(&[5.0], 0.75), 5.0);
    }
}
