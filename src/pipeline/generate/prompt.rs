//! Prompt templates: text with `{{name}}` placeholders (files under `prompts/`).

use std::collections::HashMap;

use super::{GenerateError, Result};

/// A template; rendering fails on a placeholder without a value, so a renamed placeholder in a
/// prompt file never silently sends `{{query}}` to the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptTemplate {
    name: String,
    text: String,
}

impl PromptTemplate {
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            text: text.into(),
        }
    }

    /// Reads a template file (for prompts overridden at run time).
    pub fn from_file(path: &std::path::Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| GenerateError::Prompt {
            name: path.display().to_string(),
            message: e.to_string(),
        })?;
        Ok(Self::new(path.display().to_string(), text))
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The template's own words: its text with every `{{key}}` left out.
    pub fn fixed_text(&self) -> String {
        let mut out = String::with_capacity(self.text.len());
        let mut rest = self.text.as_str();
        while let Some(open) = rest.find("{{") {
            out.push_str(&rest[..open]);
            out.push(' ');
            match rest[open + 2..].find("}}") {
                Some(close) => rest = &rest[open + 2 + close + 2..],
                None => return out,
            }
        }
        out.push_str(rest);
        out
    }

    /// Replaces every `{{key}}`; values are inserted verbatim (not re-scanned).
    pub fn render(&self, values: &HashMap<&str, String>) -> Result<String> {
        let mut out = String::with_capacity(self.text.len() + 1024);
        let mut rest = self.text.as_str();
        while let Some(open) = rest.find("{{") {
            out.push_str(&rest[..open]);
            let after = &rest[open + 2..];
            let close = after.find("}}").ok_or_else(|| GenerateError::Prompt {
                name: self.name.clone(),
                message: "unclosed {{".into(),
            })?;
            let key = after[..close].trim();
            let value = values.get(key).ok_or_else(|| GenerateError::Prompt {
                name: self.name.clone(),
                message: format!("no value for placeholder {{{{{key}}}}}"),
            })?;
            out.push_str(value);
            rest = &after[close + 2..];
        }
        out.push_str(rest);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_and_rejects_unknown_placeholders() {
        let t = PromptTemplate::new("t", "Q: {{ query }} ({{n}}) {{query}}");
        let mut v = HashMap::new();
        v.insert("query", "a {{n}} b".to_string());
        v.insert("n", "3".to_string());
        assert_eq!(t.render(&v).unwrap(), "Q: a {{n}} b (3) a {{n}} b");
        v.remove("n");
        let e = t.render(&v).unwrap_err().to_string();
        assert!(e.contains("{{n}}"), "{e}");
        assert!(PromptTemplate::new("u", "x {{y").render(&v).is_err());
    }
}
