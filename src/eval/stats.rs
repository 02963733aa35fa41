//! Significance tests for paired per-topic scores: the paired t-test, the paired randomization
//! (sign-flip permutation) test and Holm–Bonferroni correction.
//!
//! - **t-test**: as `scipy.stats.ttest_rel` (two-sided): `t = mean(d) / (sd(d) / sqrt(n))` with the
//!   sample standard deviation (n − 1), `n − 1` degrees of freedom. The Student t tail comes from
//!   the regularized incomplete beta function (Lentz's continued fraction), not a table. When every
//!   difference is zero (or n < 2) the test is undefined (`None`, where SciPy gives NaN); constant
//!   non-zero differences give t = ±∞ and p = 0, as in SciPy.
//! - **Randomization test**: under the null hypothesis each topic's difference is as likely to have
//!   either sign, so the null distribution is that of `Σ ±d_i`. Two-sided
//!   `p = (count(|Σ ±d_i| ≥ |Σ d_i|) + 1) / (N + 1)` over N random sign assignments (the
//!   observed one counts once: the p-value is never 0). Zero differences cannot change the sum and
//!   are left out; when the m non-zero differences have at most N sign assignments (2^m ≤ N) all
//!   of them are enumerated and `p = count / 2^m` exactly, which is what SciPy's
//!   `permutation_test(..., permutation_type='samples')` computes when it enumerates. For the
//!   random case SciPy doubles the smaller one-sided p-value; the two conventions agree up to
//!   sampling error (the null distribution is symmetric). "≥" allows a relative tolerance of
//!   100 ε, as SciPy does, so sums that are equal but for rounding count.
//! - **Random numbers**: xoshiro256++ seeded through SplitMix64, written out here so a seed gives the
//!   same p-values on every platform and with every version of the `rand` crate.
//! - **Holm–Bonferroni**: the step-down adjustment (`statsmodels` `multipletests(method='holm')`).

/// ln Γ(x) for x > 0 (Lanczos, g = 7, 9 terms; relative error below 1e-15).
pub fn ln_gamma(x: f64) -> f64 {
    const COEF: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection: Γ(x) Γ(1 − x) = π / sin(πx).
        return (std::f64::consts::PI / (std::f64::consts::PI * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = COEF[0];
    for (i, c) in COEF.iter().enumerate().skip(1) {
        a += c / (x + i as f64);
    }
    let t = x + 7.5;
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// The continued fraction of the incomplete beta function (modified Lentz).
fn beta_continued_fraction(a: f64, b: f64, x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    const MAX_TERMS: usize = 10_000;
    let guard = |v: f64| if v.abs() < TINY { TINY } else { v };
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 / guard(1.0 - qab * x / qap);
    let mut h = d;
    for m in 1..=MAX_TERMS {
        let m = m as f64;
        let m2 = 2.0 * m;
        let aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1.0 / guard(1.0 + aa * d);
        c = guard(1.0 + aa / c);
        h *= d * c;
        let aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1.0 / guard(1.0 + aa * d);
        c = guard(1.0 + aa / c);
        let delta = d * c;
        h *= delta;
        if (delta - 1.0).abs() < f64::EPSILON {
            break;
        }
    }
    h
}

/// The regularized incomplete beta function I_x(a, b), given x and y = 1 − x separately so that a
/// caller who knows 1 − x exactly loses no digits to the subtraction.
pub fn regularized_incomplete_beta(a: f64, b: f64, x: f64, y: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if y <= 0.0 {
        return 1.0;
    }
    let ln_beta = ln_gamma(a) + ln_gamma(b) - ln_gamma(a + b);
    let front = (a * x.ln() + b * y.ln() - ln_beta).exp();
    // The fraction converges fast on this side of the mean; use symmetry on the other.
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_continued_fraction(a, b, x) / a
    } else {
        1.0 - front * beta_continued_fraction(b, a, y) / b
    }
}

/// Two-sided tail of Student's t with `df` degrees of freedom: P(|T| ≥ |t|).
pub fn student_t_two_sided(t: f64, df: f64) -> f64 {
    if t.is_infinite() {
        return 0.0;
    }
    let t2 = t * t;
    regularized_incomplete_beta(df / 2.0, 0.5, df / (df + t2), t2 / (df + t2))
}

/// Student's t cumulative distribution function P(T ≤ t).
pub fn student_t_cdf(t: f64, df: f64) -> f64 {
    let half_tail = student_t_two_sided(t, df) / 2.0;
    if t > 0.0 {
        1.0 - half_tail
    } else {
        half_tail
    }
}

/// A paired t-test on differences.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TTest {
    /// `None` when undefined (fewer than two topics, or every difference zero).
    pub t: Option<f64>,
    pub df: usize,
    /// Two-sided p-value; `None` when `t` is.
    pub p: Option<f64>,
}

/// The paired t-test of differences `d` (second system minus first), as `scipy.stats.ttest_rel`.
pub fn paired_t_test(d: &[f64]) -> TTest {
    let n = d.len();
    let undefined = TTest {
        t: None,
        df: n.saturating_sub(1),
        p: None,
    };
    if n < 2 {
        return undefined;
    }
    let nf = n as f64;
    let mean = d.iter().sum::<f64>() / nf;
    let var = d.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (nf - 1.0);
    let t = mean / (var / nf).sqrt();
    if t.is_nan() {
        return undefined;
    }
    let df = n - 1;
    TTest {
        t: Some(t),
        df,
        p: Some(student_t_two_sided(t, df as f64)),
    }
}

/// xoshiro256++ (Blackman & Vigna), seeded with SplitMix64.
#[derive(Debug, Clone)]
pub struct Xoshiro256 {
    s: [u64; 4],
}

impl Xoshiro256 {
    pub fn seed_from_u64(seed: u64) -> Self {
        let mut z = seed;
        let mut next = || {
            z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut x = z;
            x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            x ^ (x >> 31)
        };
        Xoshiro256 {
            s: [next(), next(), next(), next()],
        }
    }

    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }
}

/// The outcome of a paired randomization test.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RandomizationTest {
    /// Two-sided p-value (see the module documentation).
    pub p: f64,
    /// Sign assignments evaluated: N, or 2^m when enumerated.
    pub permutations: u64,
    /// Every sign assignment was enumerated (the p-value is exact).
    pub exact: bool,
}

/// The paired randomization test of differences `d`: `permutations` random sign flips from `seed`,
/// or all of them when there are no more than `permutations`.
pub fn paired_randomization_test(d: &[f64], permutations: u64, seed: u64) -> RandomizationTest {
    let nonzero: Vec<f64> = d.iter().copied().filter(|&x| x != 0.0).collect();
    let observed: f64 = nonzero.iter().sum::<f64>().abs();
    let threshold = observed - 100.0 * f64::EPSILON * observed;
    let m = nonzero.len();
    if m < 63 && (1u64 << m) <= permutations.max(1) {
        let total = 1u64 << m;
        let count = (0..total)
            .filter(|&mask| {
                let s: f64 = nonzero
                    .iter()
                    .enumerate()
                    .map(|(i, &x)| if mask >> i & 1 == 1 { -x } else { x })
                    .sum();
                s.abs() >= threshold
            })
            .count() as u64;
        return RandomizationTest {
            p: count as f64 / total as f64,
            permutations: total,
            exact: true,
        };
    }
    let mut rng = Xoshiro256::seed_from_u64(seed);
    let mut count = 0u64;
    for _ in 0..permutations {
        let mut s = 0.0f64;
        let mut bits = 0u64;
        for (i, &x) in nonzero.iter().enumerate() {
            if i % 64 == 0 {
                bits = rng.next_u64();
            }
            s += if bits >> (i % 64) & 1 == 1 { -x } else { x };
        }
        if s.abs() >= threshold {
            count += 1;
        }
    }
    RandomizationTest {
        p: (count + 1) as f64 / (permutations + 1) as f64,
        permutations,
        exact: false,
    }
}

/// Holm–Bonferroni adjusted p-values; undefined (`None`) entries are not part of the family and
/// stay `None`.
pub fn holm(p: &[Option<f64>]) -> Vec<Option<f64>> {
    let mut order: Vec<(usize, f64)> = p
        .iter()
        .enumerate()
        .filter_map(|(i, v)| v.map(|v| (i, v)))
        .collect();
    order.sort_by(|a, b| a.1.total_cmp(&b.1));
    let m = order.len();
    let mut out = vec![None; p.len()];
    let mut running = 0.0f64;
    for (rank, (i, v)) in order.into_iter().enumerate() {
        running = running.max(((m - rank) as f64 * v).min(1.0));
        out[i] = Some(running);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) {
        assert!(
            (a - b).abs() <= tol * b.abs().max(1e-300),
            "{a} vs {b} (relative tolerance {tol})"
        );
    }

    #[test]
    fn ln_gamma_known_values() {
        close(ln_gamma(1.0).exp(), 1.0, 1e-14);
        close(ln_gamma(5.0).exp(), 24.0, 1e-14);
        close(ln_gamma(0.5), std::f64::consts::PI.sqrt().ln(), 1e-14);
        // ln Γ(100) = ln(99!)
        let ln_fact: f64 = (1..100).map(|k| (k as f64).ln()).sum();
        close(ln_gamma(100.0), ln_fact, 1e-14);
    }

    #[test]
    fn t_tail_closed_forms() {
        // df = 1 (Cauchy): P(|T| ≥ t) = 1 − 2 atan(t) / π = 2 atan(1/t) / π;
        // df = 2: 1 − t / sqrt(2 + t²) = 2 / (sqrt(2 + t²) (sqrt(2 + t²) + t)). The second forms
        // keep their digits in the far tail.
        for t in [0.1, 0.5, 1.0, 2.0, 5.0, 40.0, 1e4] {
            let cauchy = 2.0 * f64::atan(1.0 / t) / std::f64::consts::PI;
            close(student_t_two_sided(t, 1.0), cauchy, 1e-12);
            close(student_t_two_sided(-t, 1.0), cauchy, 1e-12);
            let r = (2.0 + t * t).sqrt();
            close(student_t_two_sided(t, 2.0), 2.0 / (r * (r + t)), 1e-12);
        }
        assert_eq!(student_t_two_sided(0.0, 7.0), 1.0);
        assert_eq!(student_t_two_sided(f64::INFINITY, 7.0), 0.0);
    }

    #[test]
    fn t_tail_matches_scipy() {
        // scipy.stats.t.sf(t, df) * 2 with SciPy 1.17.1.
        let cases = [
            (2.228138851986274, 10.0, 0.050000000000000044),
            (1.0, 5.0, 0.3632174676491229),
            (3.5, 42.0, 0.0011158515427998877),
            (0.25, 97.0, 0.803116051978424),
            (8.0, 42.0, 5.595552168815844e-10),
            (-2.0, 30.0, 0.054625044962983094),
        ];
        for (t, df, p) in cases {
            close(student_t_two_sided(t, df), p, 1e-10);
        }
        close(student_t_cdf(-2.0, 30.0), 0.054625044962983094 / 2.0, 1e-10);
        close(
            student_t_cdf(2.0, 30.0),
            1.0 - 0.054625044962983094 / 2.0,
            1e-12,
        );
    }

    #[test]
    fn t_test_like_scipy_ttest_rel() {
        // ttest_rel(b, a) for a = [0.2, 0.4, 0.1, 0.7, 0.5], b = [0.3, 0.6, 0.1, 0.9, 0.4].
        let d = [0.1, 0.2, 0.0, 0.2, -0.1];
        let r = paired_t_test(&d);
        close(r.t.unwrap(), 1.3719886811400706, 1e-12);
        assert_eq!(r.df, 4);
        close(r.p.unwrap(), 0.24198153056802096, 1e-10);
        // Undefined and degenerate cases.
        assert_eq!(paired_t_test(&[0.0, 0.0, 0.0]).p, None);
        assert_eq!(paired_t_test(&[0.3]).t, None);
        let constant = paired_t_test(&[0.5, 0.5, 0.5, 0.5]);
        assert_eq!(constant.p, Some(0.0));
    }

    #[test]
    fn randomization_exact_enumeration() {
        // Differences 1, 2, 3 (and a zero, which changes nothing): sums of ±1 ±2 ±3 are
        // ±6, ±4, ±2, ±0 (0 twice); |sum| ≥ 6 in 2 of 8 assignments.
        let r = paired_randomization_test(&[1.0, 0.0, 2.0, 3.0], 10_000, 1);
        assert_eq!((r.p, r.permutations, r.exact), (0.25, 8, true));
        // Observed 1 − 2 + 3 = 2; |sum| ≥ 2: all but the two zero sums.
        let r = paired_randomization_test(&[1.0, -2.0, 3.0, 0.0], 8, 1);
        assert_eq!((r.p, r.exact), (0.75, true));
        // No differences: p = 1.
        let r = paired_randomization_test(&[0.0, 0.0], 100, 1);
        assert_eq!((r.p, r.exact), (1.0, true));
    }

    #[test]
    fn randomization_sampled_is_seeded_and_close_to_exact() {
        let d: Vec<f64> = (0..20)
            .map(|i| ((i * 7 % 11) as f64 - 3.0) / 10.0)
            .collect();
        let exact = paired_randomization_test(&d, 1 << 20, 0);
        assert!(exact.exact);
        let a = paired_randomization_test(&d, 20_000, 7);
        let b = paired_randomization_test(&d, 20_000, 7);
        let c = paired_randomization_test(&d, 20_000, 8);
        assert!(!a.exact);
        assert_eq!(a, b);
        assert_ne!(a.p, c.p);
        assert!((a.p - exact.p).abs() < 0.01, "{} vs {}", a.p, exact.p);
    }

    #[test]
    fn xoshiro_reference_sequence() {
        // First outputs of xoshiro256++ from the state {1, 2, 3, 4} (the authors' C code).
        let mut r = Xoshiro256 { s: [1, 2, 3, 4] };
        let got: Vec<u64> = (0..3).map(|_| r.next_u64()).collect();
        assert_eq!(got, [41943041, 58720359, 3588806011781223]);
    }

    #[test]
    fn holm_step_down() {
        let p = [Some(0.01), Some(0.04), None, Some(0.03)];
        let adj = holm(&p);
        // Sorted 0.01, 0.03, 0.04 × 3, 2, 1 = 0.03, 0.06, 0.04 → monotone 0.03, 0.06, 0.06.
        assert_eq!(adj[0], Some(0.03));
        assert_eq!(adj[2], None);
        close(adj[3].unwrap(), 0.06, 1e-15);
        close(adj[1].unwrap(), 0.06, 1e-15);
        assert_eq!(holm(&[Some(0.6), Some(0.7)]), vec![Some(1.0), Some(1.0)]);
    }
}
