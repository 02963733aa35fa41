//! Cross-validation folds by topic: a topic's conversations (its personas, a tree's branches)
//! always fall in one fold, so no fold is tested on a topic it was trained on.

/// The topic a conversation id belongs to: iKAT's `9-1` and `9-2` are one topic told by two
/// personas, so they share a fold (otherwise a fold would see its own topic in training).
pub fn topic_of(conversation: &str) -> &str {
    conversation.split('-').next().unwrap_or(conversation)
}

/// Fold (0..k) of each conversation id: distinct topics in sorted order, dealt round-robin.
pub fn topic_folds(conversations: &[String], k: usize) -> Vec<usize> {
    let mut topics: Vec<&str> = conversations.iter().map(|c| topic_of(c)).collect();
    topics.sort_unstable();
    topics.dedup();
    conversations
        .iter()
        .map(|c| {
            let t = topic_of(c);
            topics.iter().position(|x| *x == t).unwrap_or(0) % k.max(1)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn personas_of_a_topic_share_a_fold() {
        let ids: Vec<String> = ["9-1", "9-2", "10-1", "11-1", "12-1"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let folds = topic_folds(&ids, 2);
        assert_eq!(folds[0], folds[1]);
        assert_eq!(folds, vec![1, 1, 0, 1, 0]);
    }
}
