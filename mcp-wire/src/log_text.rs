//! Text from a server made safe for a log line.

/// The most bytes of server text a log line carries.
pub const LOG_TEXT_MAX: usize = 200;

/// Strips control characters from `text` and cuts it at [`LOG_TEXT_MAX`] bytes, on a
/// character boundary.
///
/// ```
/// use mcp_wire::log_text;
///
/// assert_eq!(log_text("bad\u{1b}[31m\nthing"), "bad[31mthing");
/// let long = "é".repeat(150); // 300 bytes
/// assert_eq!(log_text(&long).len(), 200);
/// ```
pub fn log_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len().min(LOG_TEXT_MAX));
    for c in text.chars().filter(|c| !c.is_control()) {
        if out.len() + c.len_utf8() > LOG_TEXT_MAX {
            break;
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_the_bound_and_past_it() {
        assert_eq!(log_text(&"a".repeat(200)), "a".repeat(200));
        assert_eq!(log_text(&"a".repeat(201)), "a".repeat(200));
        // A 3-byte character that would straddle the bound is left out whole.
        let s = format!("{}€", "a".repeat(198));
        assert_eq!(log_text(&s), "a".repeat(198));
        let s = format!("{}€", "a".repeat(197));
        assert_eq!(log_text(&s), s);
    }

    #[test]
    fn control_characters_do_not_count() {
        let s = format!("{}{}", "\u{7}".repeat(50), "b".repeat(200));
        assert_eq!(log_text(&s), "b".repeat(200));
        assert_eq!(log_text("a\u{0}b\u{9f}c\td"), "abcd");
    }
}
