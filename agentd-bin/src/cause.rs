//! Errors under others: an error kept as the cause of the one it explains ([`Cause`]), and an
//! error told with all its causes ([`chain`]), for the libraries whose own message says
//! little (hyper's is often just "client error").

use std::fmt;
use std::sync::Arc;

/// An error kept as the cause of another, and given as its `source()`. Shared, so that the
/// error holding it stays cheap to clone; two are equal when they say the same.
#[derive(Clone)]
pub(crate) struct Cause(Arc<dyn std::error::Error + Send + Sync>);

impl Cause {
    /// `error`, kept.
    pub(crate) fn new(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self(Arc::new(error))
    }

    /// The error kept, as the `source()` of the one it explains.
    pub(crate) fn error(&self) -> &(dyn std::error::Error + 'static) {
        &*self.0
    }
}

impl fmt::Debug for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl PartialEq for Cause {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_string() == other.0.to_string()
    }
}

impl Eq for Cause {}

/// `error` and its sources, each after a `: `.
pub(crate) fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Outer(std::io::Error);

    impl fmt::Display for Outer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("client error")
        }
    }

    impl std::error::Error for Outer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn a_chain_says_every_cause_and_a_cause_is_its_error() {
        let outer = Outer(std::io::Error::other("connection refused"));
        assert_eq!(chain(&outer), "client error: connection refused");
        let cause = Cause::new(outer);
        assert_eq!(cause.to_string(), "client error");
        let source = cause.error().source().map(ToString::to_string);
        assert_eq!(source.as_deref(), Some("connection refused"));
        assert_eq!(cause, Cause::new(std::io::Error::other("client error")));
    }
}
