//! JSON text exactly as Python's `json.dumps(obj)` writes it with its defaults: `", "` between
//! items, `": "` after keys, every non-ASCII character escaped as `\uXXXX` (lower-case hex,
//! surrogate pairs above U+FFFF) and floats in `repr()` form (`0.5`, `1.0`, `1e-05`). The
//! organizers' tools (Ragnarök, the TREC checkers) write their files this way, so convrag's
//! output is byte-comparable with theirs.

use std::io;

use serde::Serialize;
use serde_json::ser::{CharEscape, Formatter};

use super::{FormatError, Result};

/// Serializes `value` as Python's `json.dumps` would (no trailing newline).
pub fn to_string<T: Serialize + ?Sized>(value: &T) -> Result<String> {
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, PythonFormatter);
    value
        .serialize(&mut ser)
        .map_err(|e| FormatError::Invalid(e.to_string()))?;
    // The formatter only writes ASCII.
    Ok(String::from_utf8(out).expect("ASCII output"))
}

/// Python's `repr(float)`: shortest digits that round-trip, fixed notation when the decimal
/// exponent is in -4..16, otherwise `d.ddde±XX`. Non-finite values have no JSON form.
pub fn float_repr(x: f64) -> Result<String> {
    if !x.is_finite() {
        return Err(FormatError::Invalid(format!("non-finite number {x}")));
    }
    // Rust's `{:e}` prints the shortest round-trip digits, e.g. "9.9986017e-1", "1e16".
    let sci = format!("{x:e}");
    let (mantissa, exp) = sci.split_once('e').expect("exponent");
    let exp: i32 = exp.parse().expect("integer exponent");
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let n = digits.len() as i32;
    let body = if (-4..16).contains(&exp) {
        if exp < 0 {
            format!("0.{}{}", "0".repeat((-exp - 1) as usize), digits)
        } else if exp + 1 >= n {
            format!("{}{}.0", digits, "0".repeat((exp + 1 - n) as usize))
        } else {
            let (int, frac) = digits.split_at((exp + 1) as usize);
            format!("{int}.{frac}")
        }
    } else {
        let mant = if n == 1 {
            digits.clone()
        } else {
            format!("{}.{}", &digits[..1], &digits[1..])
        };
        let esign = if exp < 0 { '-' } else { '+' };
        format!("{mant}e{esign}{:02}", exp.abs())
    };
    Ok(format!("{sign}{body}"))
}

struct PythonFormatter;

impl Formatter for PythonFormatter {
    fn begin_array_value<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        if first {
            Ok(())
        } else {
            w.write_all(b", ")
        }
    }

    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        if first {
            Ok(())
        } else {
            w.write_all(b", ")
        }
    }

    fn begin_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b": ")
    }

    fn write_f64<W: ?Sized + io::Write>(&mut self, w: &mut W, value: f64) -> io::Result<()> {
        let s = float_repr(value)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
        w.write_all(s.as_bytes())
    }

    fn write_f32<W: ?Sized + io::Write>(&mut self, w: &mut W, value: f32) -> io::Result<()> {
        // Python has only doubles: an f32 is written as the double it converts to.
        self.write_f64(w, f64::from(value))
    }

    fn write_string_fragment<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        let mut start = 0;
        for (i, c) in fragment.char_indices() {
            if c.is_ascii() && c != '\x7f' {
                continue;
            }
            w.write_all(&fragment.as_bytes()[start..i])?;
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                write!(w, "\\u{unit:04x}")?;
            }
            start = i + c.len_utf8();
        }
        w.write_all(&fragment.as_bytes()[start..])
    }

    fn write_char_escape<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        escape: CharEscape,
    ) -> io::Result<()> {
        // Same escapes as Python: \" \\ \n \r \t \b \f, other controls as \u00XX.
        let s: String = match escape {
            CharEscape::Quote => "\\\"".into(),
            CharEscape::ReverseSolidus => "\\\\".into(),
            CharEscape::Solidus => "/".into(),
            CharEscape::Backspace => "\\b".into(),
            CharEscape::FormFeed => "\\f".into(),
            CharEscape::LineFeed => "\\n".into(),
            CharEscape::CarriageReturn => "\\r".into(),
            CharEscape::Tab => "\\t".into(),
            CharEscape::AsciiControl(b) => format!("\\u{b:04x}"),
        };
        w.write_all(s.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_follow_python_repr() {
        let cases = [
            (0.99986017, "0.99986017"),
            (23.1161, "23.1161"),
            (1.0, "1.0"),
            (100.0, "100.0"),
            (-0.0, "-0.0"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1.5e-7, "1.5e-07"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (123456789.125, "123456789.125"),
            (-2.5e20, "-2.5e+20"),
            (0.1 + 0.2, "0.30000000000000004"),
        ];
        for (x, want) in cases {
            assert_eq!(float_repr(x).unwrap(), want, "{x}");
        }
        assert!(float_repr(f64::NAN).is_err());
    }

    #[test]
    fn strings_and_separators_follow_json_dumps() {
        let v = serde_json::json!({"a": [1, 2.5, "x\u{2013}y\u{1F600}\u{7f}\"\n\u{1}"], "b": {}});
        assert_eq!(
            to_string(&v).unwrap(),
            r#"{"a": [1, 2.5, "x\u2013y\ud83d\ude00\u007f\"\n\u0001"], "b": {}}"#
        );
    }
}
