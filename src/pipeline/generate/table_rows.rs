//! Rows of a reference table read as statements: a manual lists its functions and views in
//! tables ("`pg_table_size` ( `regclass` ) → `bigint` Computes the disk space …"), and a reader
//! asking how to do something is answered by one such row, its name first.

use crate::text::sentences::split_sentences;

/// The statements of a Markdown table's rows that name a thing in code and describe it: the
/// name (a function's first signature) as the subject, then the first sentence of its
/// description ("`pg_stat_activity`: One row per server process, …"). Header, separator and
/// rows that do not start with code give none.
pub fn row_statements(table: &str) -> Vec<String> {
    let lines: Vec<&str> = table.lines().map(str::trim).collect();
    lines
        .iter()
        .enumerate()
        .filter(|(i, line)| {
            !is_separator(line) && !lines.get(i + 1).is_some_and(|next| is_separator(next))
        })
        .filter_map(|(_, line)| row_statement(&cells(line)))
        .collect()
}

/// `| --- | :-: |`
fn is_separator(line: &str) -> bool {
    line.contains('-') && line.chars().all(|c| matches!(c, '|' | '-' | ':' | ' '))
}

/// A row's cells, trimmed (`\|` is a pipe inside a cell).
fn cells(line: &str) -> Vec<String> {
    let inner = line.trim().trim_start_matches('|');
    let inner = inner.strip_suffix('|').unwrap_or(inner);
    let mut out = vec![String::new()];
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                out.last_mut().expect("one cell").push('|');
                chars.next();
            }
            '|' => out.push(String::new()),
            c => out.last_mut().expect("one cell").push(c),
        }
    }
    out.into_iter().map(|c| c.trim().to_string()).collect()
}

fn row_statement(cells: &[String]) -> Option<String> {
    let first = cells.first()?;
    if !first.starts_with('`') {
        return None;
    }
    let (signature, description) = match prose_start(first) {
        // One cell holds both: "`f` ( `x` ) → `t` Does this."
        Some(at) => (&first[..at], first[at..].to_string()),
        None => (
            first.as_str(),
            cells[1..]
                .iter()
                .find(|c| prose_start(c).is_some())?
                .clone(),
        ),
    };
    let subject = first_signature(signature.trim());
    let sentence = split_sentences(&description).into_iter().next()?;
    (!subject.is_empty()).then(|| format!("{subject}: {sentence}"))
}

/// Where the first word outside code spans starts: the description after a signature.
fn prose_start(cell: &str) -> Option<usize> {
    let mut in_code = false;
    for (i, c) in cell.char_indices() {
        match c {
            '`' => in_code = !in_code,
            c if !in_code && c.is_alphabetic() => return Some(i),
            _ => {}
        }
    }
    None
}

/// The first of several overloads listed one after another: up to the code span that follows
/// its first `→`, or all of it when it has no result type.
fn first_signature(signature: &str) -> &str {
    let Some(arrow) = signature.find('→') else {
        return signature;
    };
    let rest = &signature[arrow..];
    let Some(open) = rest.find('`') else {
        return signature;
    };
    match rest[open + 1..].find('`') {
        Some(close) => signature[..arrow + open + 1 + close + 1].trim_end(),
        None => signature,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_function_row_reads_as_its_first_signature_and_first_sentence() {
        let table = "| Function Description |\n| --- |\n\
            | `f_size` ( `regclass` ) → `bigint` Computes the space used by a table. More detail follows. |\n\
            | `f_series` ( `start` `integer` ) → `setof integer` `f_series` ( `start` `bigint` ) → `setof bigint` Generates values from `start`. |";
        assert_eq!(
            row_statements(table),
            vec![
                "`f_size` ( `regclass` ) → `bigint`: Computes the space used by a table.",
                "`f_series` ( `start` `integer` ) → `setof integer`: Generates values from `start`.",
            ]
        );
    }

    #[test]
    fn a_name_column_reads_with_the_first_descriptive_cell_and_other_rows_give_nothing() {
        let table = "| View Name | Description |\n| --- | --- |\n\
            | `pg_stat_x` | One row per process, such as its state. See `pg_stat_x`. |\n\
            | `a \\| b` | `oid` | Either one or the other. |\n\
            | plain text | Not a name. |\n\
            | `only_code` | `int4` |";
        assert_eq!(
            row_statements(table),
            vec![
                "`pg_stat_x`: One row per process, such as its state.",
                "`a | b`: Either one or the other.",
            ]
        );
    }
}
