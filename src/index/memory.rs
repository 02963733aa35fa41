//! [`MemoryRetriever`]: passages held in memory by id, for unit tests of the steps that read a
//! collection's passages and pages rather than search it.

use std::collections::BTreeMap;

use super::Result;
use super::{Hit, Retriever, SearchOptions, WeightedQuery};

/// Passages by id; its search finds nothing.
#[derive(Debug, Default)]
pub struct MemoryRetriever {
    passages: BTreeMap<String, Hit>,
}

impl MemoryRetriever {
    pub fn new(passages: impl IntoIterator<Item = Hit>) -> Self {
        MemoryRetriever {
            passages: passages.into_iter().map(|h| (h.id.clone(), h)).collect(),
        }
    }
}

impl Retriever for MemoryRetriever {
    fn search_with(&self, _: &WeightedQuery, _: &SearchOptions) -> Result<Vec<Hit>> {
        Ok(Vec::new())
    }

    fn passage(&self, id: &str) -> Result<Option<Hit>> {
        Ok(self.passages.get(id).cloned())
    }

    fn ids_with_prefix(&self, prefix: &str, limit: usize) -> Result<Vec<String>> {
        Ok(self
            .passages
            .range(prefix.to_string()..)
            .take_while(|(id, _)| id.starts_with(prefix))
            .take(limit)
            .map(|(id, _)| id.clone())
            .collect())
    }

    fn num_passages(&self) -> u64 {
        self.passages.len() as u64
    }
}
