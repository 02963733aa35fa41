//! Fusion of first-stage (BM25) and neural scores for one query's candidates.

use std::fmt;
use std::str::FromStr;

use super::{order_by_score, RerankError};

/// How final scores are made from first-stage and neural scores.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Fusion {
    /// Neural scores only.
    #[default]
    None,
    /// Reciprocal-rank fusion: `1/(k + rank_bm25) + 1/(k + rank_neural)`, ranks from 1.
    Rrf { k: f32 },
    /// `w · minmax(bm25) + (1 - w) · minmax(neural)`, min-max normalized per query.
    Weighted { bm25_weight: f32 },
}

impl FromStr for Fusion {
    type Err = RerankError;

    /// `none`, `rrf` (k = 60), `rrf:K`, `weighted:W` (W = BM25 weight in [0, 1]).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || RerankError::Fusion(s.to_string());
        let (name, arg) = match s.split_once(':') {
            Some((n, a)) => (n, Some(a)),
            None => (s, None),
        };
        match (name, arg) {
            ("none", None) => Ok(Fusion::None),
            ("rrf", None) => Ok(Fusion::Rrf { k: 60.0 }),
            ("rrf", Some(a)) => {
                let k: f32 = a.parse().map_err(|_| bad())?;
                if k.is_finite() && k > 0.0 {
                    Ok(Fusion::Rrf { k })
                } else {
                    Err(bad())
                }
            }
            ("weighted", Some(a)) => {
                let w: f32 = a.parse().map_err(|_| bad())?;
                if (0.0..=1.0).contains(&w) {
                    Ok(Fusion::Weighted { bm25_weight: w })
                } else {
                    Err(bad())
                }
            }
            _ => Err(bad()),
        }
    }
}

impl fmt::Display for Fusion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fusion::None => write!(f, "none"),
            Fusion::Rrf { k } => write!(f, "rrf:{k}"),
            Fusion::Weighted { bm25_weight } => write!(f, "weighted:{bm25_weight}"),
        }
    }
}

/// Stored and read as its string (`"weighted:0.2"`), so settings recorded before the type
/// existed read back unchanged.
impl serde::Serialize for Fusion {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Fusion {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl Fusion {
    /// The fusion chosen on TREC DL 2019 (BENCHMARKS.md): mostly the model, with BM25 breaking
    /// the model's near ties.
    pub const RECOMMENDED: Fusion = Fusion::Weighted { bm25_weight: 0.2 };

    /// The fusion after hybrid retrieval, chosen by 5-fold cross-validation over Cranfield's
    /// queries (BENCHMARKS.md, "Hybrid turns"). The reranker is the bi-encoder that found half
    /// of the candidates, so BM25 needs a larger share to keep its vote.
    pub const RECOMMENDED_HYBRID: Fusion = Fusion::Weighted { bm25_weight: 0.35 };

    /// Final scores for candidates with first-stage scores `first` and neural scores `neural`
    /// (same length and order).
    pub fn fuse(&self, first: &[f32], neural: &[f32]) -> Vec<f32> {
        assert_eq!(
            first.len(),
            neural.len(),
            "one first-stage score per neural score"
        );
        match *self {
            Fusion::None => neural.to_vec(),
            Fusion::Rrf { k } => {
                let rank_first = ranks(first);
                let rank_neural = ranks(neural);
                (0..first.len())
                    .map(|i| 1.0 / (k + rank_first[i] as f32) + 1.0 / (k + rank_neural[i] as f32))
                    .collect()
            }
            Fusion::Weighted { bm25_weight } => {
                let a = min_max(first);
                let b = min_max(neural);
                a.iter()
                    .zip(&b)
                    .map(|(x, y)| bm25_weight * x + (1.0 - bm25_weight) * y)
                    .collect()
            }
        }
    }
}

/// 1-based rank of each item under descending score (ties by original order).
fn ranks(scores: &[f32]) -> Vec<usize> {
    let mut rank = vec![0; scores.len()];
    for (r, i) in order_by_score(scores).into_iter().enumerate() {
        rank[i] = r + 1;
    }
    rank
}

fn min_max(scores: &[f32]) -> Vec<f32> {
    let lo = scores.iter().copied().fold(f32::INFINITY, f32::min);
    let hi = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    // Constant (or empty) lists carry no ranking signal.
    if hi.partial_cmp(&lo) != Some(std::cmp::Ordering::Greater) {
        return vec![0.0; scores.len()];
    }
    scores.iter().map(|s| (s - lo) / (hi - lo)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_rejects() {
        assert_eq!("none".parse::<Fusion>().unwrap(), Fusion::None);
        assert_eq!("rrf".parse::<Fusion>().unwrap(), Fusion::Rrf { k: 60.0 });
        assert_eq!("rrf:10".parse::<Fusion>().unwrap(), Fusion::Rrf { k: 10.0 });
        assert_eq!(
            "weighted:0.3".parse::<Fusion>().unwrap(),
            Fusion::Weighted { bm25_weight: 0.3 }
        );
        for bad in ["weighted", "weighted:1.5", "rrf:-1", "rrf:x", "sum", ""] {
            assert!(bad.parse::<Fusion>().is_err(), "{bad}");
        }
    }

    #[test]
    fn rrf_rewards_agreement() {
        // Candidate 1 is second in both lists, candidate 0 first in BM25 but last neurally.
        let fused = Fusion::Rrf { k: 60.0 }.fuse(&[3.0, 2.0, 1.0], &[0.1, 0.5, 0.9]);
        let expect = [
            1.0 / 61.0 + 1.0 / 63.0,
            1.0 / 62.0 + 1.0 / 62.0,
            1.0 / 63.0 + 1.0 / 61.0,
        ];
        for (a, b) in fused.iter().zip(expect) {
            assert!((a - b).abs() < 1e-7);
        }
    }

    #[test]
    fn weighted_uses_min_max() {
        let fused = Fusion::Weighted { bm25_weight: 0.25 }.fuse(&[10.0, 20.0], &[0.5, 0.1]);
        assert_eq!(fused, vec![0.75, 0.25]);
        // Constant lists normalize to 0 rather than dividing by zero.
        let fused = Fusion::Weighted { bm25_weight: 0.5 }.fuse(&[1.0, 1.0], &[0.0, 1.0]);
        assert_eq!(fused, vec![0.0, 0.5]);
    }

    #[test]
    fn serde_is_the_stored_string() {
        let json = serde_json::to_string(&Fusion::RECOMMENDED).unwrap();
        assert_eq!(json, "\"weighted:0.2\"");
        let back: Fusion = serde_json::from_str("\"rrf:60\"").unwrap();
        assert_eq!(back, Fusion::Rrf { k: 60.0 });
        assert!(serde_json::from_str::<Fusion>("\"weighted:2\"").is_err());
    }
}
