//! The timestamps MCP Events carries (`timestamp`, `refreshBefore`): RFC 3339, read into Unix
//! milliseconds.

/// Reads an RFC 3339 date-time (`2026-11-30T06:00:00Z`, `…T06:00:00.250+01:00`) as Unix
/// milliseconds; `None` when it is not one.
///
/// ```
/// use mcp_events::time::unix_millis;
///
/// assert_eq!(unix_millis("1970-01-01T00:00:01.5Z"), Some(1500));
/// assert_eq!(unix_millis("2026-11-30T07:00:00+01:00"), unix_millis("2026-11-30T06:00:00Z"));
/// assert_eq!(unix_millis("2026-02-30T00:00:00Z"), None);
/// ```
pub fn unix_millis(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[13] != b':' || b[16] != b':' {
        return None;
    }
    if !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    let num = |from: usize, to: usize| -> Option<i64> {
        b[from..to].iter().try_fold(0i64, |n, c| {
            c.is_ascii_digit().then(|| n * 10 + i64::from(c - b'0'))
        })
    };
    let (year, month, day) = (num(0, 4)?, num(5, 7)?, num(8, 10)?);
    let (hour, minute, second) = (num(11, 13)?, num(14, 16)?, num(17, 19)?);
    if !(1..=12).contains(&month)
        || day < 1
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let mut rest = &b[19..];
    let mut millis = 0;
    if let [b'.', tail @ ..] = rest {
        let digits = tail.iter().take_while(|c| c.is_ascii_digit()).count();
        if digits == 0 {
            return None;
        }
        for (i, c) in tail[..digits].iter().take(3).enumerate() {
            millis += i64::from(c - b'0') * [100, 10, 1][i];
        }
        rest = &tail[digits..];
    }
    let offset_minutes = match rest {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let two = |a: u8, b: u8| {
                (a.is_ascii_digit() && b.is_ascii_digit())
                    .then(|| i64::from(a - b'0') * 10 + i64::from(b - b'0'))
            };
            let (h, m) = (two(*h1, *h2)?, two(*m1, *m2)?);
            if h > 23 || m > 59 {
                return None;
            }
            let minutes = h * 60 + m;
            match sign {
                b'+' => minutes,
                _ => -minutes,
            }
        }
        _ => return None,
    };
    let days = days_from_civil(year, month, day);
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset_minutes * 60;
    Some(seconds * 1000 + millis)
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_servers_send() {
        assert_eq!(unix_millis("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(unix_millis("2026-10-05T12:00:00Z"), Some(1_791_201_600_000));
        assert_eq!(
            unix_millis("2026-10-05T12:00:00.123456Z"),
            Some(1_791_201_600_123)
        );
        assert_eq!(
            unix_millis("2026-10-05T14:30:00+02:30"),
            Some(1_791_201_600_000)
        );
        assert_eq!(unix_millis("2024-02-29T00:00:00z"), Some(1_709_164_800_000));
        assert_eq!(unix_millis("1969-12-31T23:59:59Z"), Some(-1000));
    }

    #[test]
    fn refuses_what_is_not_rfc_3339() {
        for bad in [
            "",
            "2026-10-05",
            "2026-10-05T12:00:00",
            "2026-10-05T12:00:00.Z",
            "2026-13-05T12:00:00Z",
            "2025-02-29T12:00:00Z",
            "2026-10-05T24:00:00Z",
            "2026-10-05T12:00:00+2:00",
            "2026-10-05T12:00:00+24:00",
            "2026-1a-05T12:00:00Z",
            "2026-10-05X12:00:00Z",
            "2026-10-05T12:00:00Zjunk",
            "+026-10-05T12:00:00Z",
        ] {
            assert_eq!(unix_millis(bad), None, "{bad:?}");
        }
    }
}
