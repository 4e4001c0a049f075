//! Standard base64 with padding (RFC 4648 §4), strict on input: what `Mcp-Name` and
//! `Mcp-Param-*` values and Standard Webhooks signatures and secrets are written in.
//!
//! ```
//! let mut text = String::new();
//! mcp_wire::base64::encode(b"agentd", &mut text);
//! assert_eq!(text, "YWdlbnRk");
//! assert_eq!(mcp_wire::base64::decode(&text).as_deref(), Some(&b"agentd"[..]));
//! assert_eq!(mcp_wire::base64::decode("YWdlbnRk="), None);
//! ```

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Appends `input` to `out` in standard base64 with padding.
pub fn encode(input: &[u8], out: &mut String) {
    for chunk in input.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
}

/// Strict standard base64 with padding; `None` on anything else.
pub fn decode(input: &str) -> Option<Vec<u8>> {
    let bytes = input.as_bytes();
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    let quads = bytes.chunks(4);
    let last = quads.len().saturating_sub(1);
    for (q, quad) in quads.enumerate() {
        let pad = quad.iter().rev().take_while(|&&b| b == b'=').count();
        if pad > 2 || (pad > 0 && q != last) {
            return None;
        }
        let mut n = 0u32;
        for &b in &quad[..4 - pad] {
            let v = ALPHABET.iter().position(|&a| a == b)?;
            n = n << 6 | v as u32;
        }
        n <<= 6 * pad as u32;
        let decoded = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        // Non-canonical encodings (stray low bits before the padding) are refused.
        let keep = 3 - pad;
        if decoded[keep..].iter().any(|&b| b != 0) {
            return None;
        }
        out.extend_from_slice(&decoded[..keep]);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_length() {
        for len in 0..40usize {
            let data: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8).collect();
            let mut s = String::new();
            encode(&data, &mut s);
            assert_eq!(decode(&s).as_deref(), Some(&data[..]), "len {len}");
        }
    }

    #[test]
    fn refuses_malformed() {
        for bad in [
            "A",
            "AB=",
            "A===",
            "AB=C",
            "AB==AB==",
            "A!==",
            "AB=="[..3].as_ref(),
            "QR==",
        ] {
            assert_eq!(decode(bad), None, "{bad:?}");
        }
    }
}
