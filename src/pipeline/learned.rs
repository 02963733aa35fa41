//! Small learned models for the pipeline's decisions (which history terms a rewrite carries,
//! how PTKB statements rank): L2-regularized logistic regression over standardized features.
//!
//! Training (`convrag tune`, `crate::tune`) fits [`LogisticModel`]s on training
//! topics only, with topic-level cross-validation (`crate::tune::folds`); serving reads the fitted
//! weights from small JSON files committed under `src/pipeline/weights/` and evaluates them in
//! pure Rust. A model names its features, so weights fitted for another feature list are refused.

use serde::{Deserialize, Serialize};

use super::{PipelineError, Result};

/// A fitted logistic model: `p = sigmoid(bias + Σ weight_i · (x_i − mean_i) / scale_i)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogisticModel {
    pub features: Vec<String>,
    pub mean: Vec<f64>,
    pub scale: Vec<f64>,
    pub weights: Vec<f64>,
    pub bias: f64,
}

fn sigmoid(z: f64) -> f64 {
    1.0 / (1.0 + (-z).exp())
}

impl LogisticModel {
    /// Fits by Newton's method (iteratively reweighted least squares) with an L2 penalty `l2` on
    /// the weights (not the bias). Deterministic: the same data gives the same weights.
    pub fn fit(features: &[&str], xs: &[Vec<f64>], ys: &[bool], l2: f64) -> Result<Self> {
        let d = features.len();
        if xs.is_empty() || xs.len() != ys.len() || xs.iter().any(|x| x.len() != d) {
            return Err(PipelineError::Input(format!(
                "cannot fit: {} examples, {} labels, {d} features",
                xs.len(),
                ys.len()
            )));
        }
        let n = xs.len() as f64;
        let mean: Vec<f64> = (0..d)
            .map(|j| xs.iter().map(|x| x[j]).sum::<f64>() / n)
            .collect();
        let scale: Vec<f64> = (0..d)
            .map(|j| {
                let var = xs.iter().map(|x| (x[j] - mean[j]).powi(2)).sum::<f64>() / n;
                if var > 1e-12 {
                    var.sqrt()
                } else {
                    1.0
                }
            })
            .collect();
        // Standardized design with a leading 1 for the bias.
        let rows: Vec<Vec<f64>> = xs
            .iter()
            .map(|x| {
                std::iter::once(1.0)
                    .chain((0..d).map(|j| (x[j] - mean[j]) / scale[j]))
                    .collect()
            })
            .collect();
        let mut beta = vec![0.0; d + 1];
        for _ in 0..50 {
            let mut grad = vec![0.0; d + 1];
            let mut hess = vec![vec![0.0; d + 1]; d + 1];
            for (row, &y) in rows.iter().zip(ys) {
                let p = sigmoid(dot(&beta, row));
                let r = p - if y { 1.0 } else { 0.0 };
                let w = (p * (1.0 - p)).max(1e-9);
                for a in 0..=d {
                    grad[a] += r * row[a];
                    for b in 0..=d {
                        hess[a][b] += w * row[a] * row[b];
                    }
                }
            }
            for a in 1..=d {
                grad[a] += l2 * beta[a];
                hess[a][a] += l2;
            }
            hess[0][0] += 1e-9;
            let step = solve(hess, grad)?;
            let mut change: f64 = 0.0;
            for (b, s) in beta.iter_mut().zip(&step) {
                *b -= s;
                change = change.max(s.abs());
            }
            if change < 1e-9 {
                break;
            }
        }
        Ok(LogisticModel {
            features: features.iter().map(|s| s.to_string()).collect(),
            mean,
            scale,
            weights: beta[1..].to_vec(),
            bias: beta[0],
        })
    }

    /// The probability of the positive class for one feature vector.
    pub fn probability(&self, x: &[f64]) -> f64 {
        let z: f64 = self.bias
            + x.iter()
                .zip(&self.mean)
                .zip(&self.scale)
                .zip(&self.weights)
                .map(|(((x, m), s), w)| w * (x - m) / s)
                .sum::<f64>();
        sigmoid(z)
    }

    /// Refuses weights fitted for a different feature list.
    pub fn check_features(&self, expected: &[&str]) -> Result<()> {
        let consistent = self.mean.len() == self.features.len()
            && self.scale.len() == self.features.len()
            && self.weights.len() == self.features.len();
        if !consistent
            || self
                .features
                .iter()
                .map(String::as_str)
                .ne(expected.iter().copied())
        {
            return Err(PipelineError::Input(format!(
                "model features {:?} do not match the code's {expected:?} (re-run convrag tune)",
                self.features
            )));
        }
        Ok(())
    }
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Solves `a x = b` by Gaussian elimination with partial pivoting.
fn solve(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Result<Vec<f64>> {
    let n = b.len();
    for col in 0..n {
        let pivot = (col..n)
            .max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))
            .unwrap_or(col);
        if a[pivot][col].abs() < 1e-15 {
            return Err(PipelineError::Input("singular system while fitting".into()));
        }
        a.swap(col, pivot);
        b.swap(col, pivot);
        let (upper, lower) = a.split_at_mut(col + 1);
        let pivot_row = &upper[col];
        for (offset, row) in lower.iter_mut().enumerate() {
            let f = row[col] / pivot_row[col];
            for (x, p) in row[col..].iter_mut().zip(&pivot_row[col..]) {
                *x -= f * p;
            }
            b[col + 1 + offset] -= f * b[col];
        }
    }
    let mut x = vec![0.0; n];
    for row in (0..n).rev() {
        let s: f64 = (row + 1..n).map(|k| a[row][k] * x[k]).sum();
        x[row] = (b[row] - s) / a[row][row];
    }
    Ok(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_separates_a_learnable_rule() {
        // y = x0 > x1, with an irrelevant constant feature.
        let mut xs = Vec::new();
        let mut ys = Vec::new();
        for i in 0..40 {
            let a = (i % 7) as f64;
            let b = (i % 5) as f64;
            xs.push(vec![a, b, 3.0]);
            ys.push(a > b);
        }
        let m = LogisticModel::fit(&["a", "b", "c"], &xs, &ys, 0.1).unwrap();
        assert!(m.weights[0] > 0.0 && m.weights[1] < 0.0, "{m:?}");
        assert_eq!(m.weights[2], 0.0);
        assert!(m.probability(&[6.0, 0.0, 3.0]) > 0.9);
        assert!(m.probability(&[0.0, 4.0, 3.0]) < 0.1);
        m.check_features(&["a", "b", "c"]).unwrap();
        assert!(m.check_features(&["a", "b"]).is_err());
    }

    #[test]
    fn fit_refuses_inconsistent_input() {
        assert!(LogisticModel::fit(&["a"], &[], &[], 1.0).is_err());
        assert!(LogisticModel::fit(&["a"], &[vec![1.0, 2.0]], &[true], 1.0).is_err());
    }
}
