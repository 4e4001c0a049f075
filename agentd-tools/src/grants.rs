//! Grants: which tools each scope is offered. The reference's table gives the defaults;
//! configuration narrows them per scope with patterns, never widens them.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::{Scope, catalogue, tool};

/// Which tools each scope is offered: the default grants, narrowed per scope by patterns
/// (a tool's name, or `family.*` for every tool named `family.<verb>`).
///
/// ```
/// use agentd_tools::{Grants, PatternError, Scope};
///
/// let grants = Grants::new([(Scope::Subagent, ["memory.*", "plan.get"])]).unwrap();
/// assert!(grants.offers(Scope::Subagent, "memory.shift"));
/// assert!(!grants.offers(Scope::Subagent, "artifact.get"));
/// assert!(grants.offers(Scope::Root, "artifact.get")); // root is not narrowed
/// // Narrowing never widens: subagents are not granted the events tools.
/// assert!(matches!(
///     Grants::new([(Scope::Subagent, ["events.*"])]),
///     Err(PatternError::NotGranted { .. })
/// ));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grants {
    narrowed: BTreeMap<Scope, BTreeSet<&'static str>>,
}

impl Grants {
    /// The default grants narrowed by `patterns`, per scope; a scope given no patterns
    /// keeps its defaults, one given an empty list is offered nothing. Refused: a name no
    /// tool has, a `family.*` no tool is in, a pattern naming only tools the scope is not
    /// granted, and any other shape.
    pub fn new<S, I>(patterns: impl IntoIterator<Item = (Scope, I)>) -> Result<Self, PatternError>
    where
        S: AsRef<str>,
        I: IntoIterator<Item = S>,
    {
        let mut narrowed: BTreeMap<Scope, BTreeSet<&'static str>> = BTreeMap::new();
        for (scope, list) in patterns {
            let offered = narrowed.entry(scope).or_default();
            for pattern in list {
                let pattern = pattern.as_ref();
                let err = |kind: fn(Scope, String) -> PatternError| kind(scope, pattern.to_owned());
                let matched: Vec<&'static str> = match pattern.strip_suffix(".*") {
                    Some(family) if !family.is_empty() && !family.contains(['*', '.']) => {
                        catalogue()
                            .iter()
                            .filter(|t| {
                                t.name
                                    .strip_prefix(family)
                                    .is_some_and(|rest| rest.starts_with('.'))
                            })
                            .map(|t| t.name)
                            .collect()
                    }
                    Some(_) => return Err(err(PatternError::Malformed)),
                    None if pattern.contains('*') => return Err(err(PatternError::Malformed)),
                    None => match tool(pattern) {
                        Some(t) => vec![t.name],
                        None => return Err(err(PatternError::UnknownTool)),
                    },
                };
                if matched.is_empty() {
                    return Err(err(PatternError::MatchesNothing));
                }
                let granted: Vec<&'static str> = matched
                    .into_iter()
                    .filter(|name| tool(name).is_some_and(|t| t.granted_to(scope)))
                    .collect();
                if granted.is_empty() {
                    return Err(err(PatternError::NotGranted));
                }
                offered.extend(granted);
            }
        }
        Ok(Self { narrowed })
    }

    /// Whether tool `name` is offered to `scope`: granted by default, and matched by the
    /// scope's patterns when it has some.
    pub fn offers(&self, scope: Scope, name: &str) -> bool {
        tool(name).is_some_and(|t| t.granted_to(scope))
            && self
                .narrowed
                .get(&scope)
                .is_none_or(|offered| offered.contains(name))
    }
}

/// Why grant patterns were refused at load.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PatternError {
    /// No tool has this name.
    UnknownTool(Scope, String),
    /// A `family.*` that no tool is in.
    MatchesNothing(Scope, String),
    /// The pattern names only tools the scope is not granted: configuration narrows grants
    /// and never widens them.
    NotGranted(Scope, String),
    /// Neither a tool's name nor `family.*`.
    Malformed(Scope, String),
}

impl fmt::Display for PatternError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownTool(scope, p) => write!(f, "{scope}: no tool is named {p:?}"),
            Self::MatchesNothing(scope, p) => write!(f, "{scope}: {p:?} matches no tool"),
            Self::NotGranted(scope, p) => write!(
                f,
                "{scope}: {p:?} names only tools {scope} is not granted (grants only narrow)"
            ),
            Self::Malformed(scope, p) => {
                write!(f, "{scope}: {p:?} is neither a tool's name nor family.*")
            }
        }
    }
}

impl std::error::Error for PatternError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_the_table() {
        let grants = Grants::default();
        assert!(grants.offers(Scope::Subagent, "finish"));
        assert!(!grants.offers(Scope::Workflow, "finish"));
        assert!(grants.offers(Scope::Workflow, "status"));
        assert!(!grants.offers(Scope::Subagent, "subagent.run"));
        assert!(!grants.offers(Scope::Root, "no.such"));
    }

    #[test]
    fn patterns_narrow_and_bad_ones_are_refused() {
        let grants = Grants::new([
            (Scope::Subagent, vec!["memory.*", "plan.*"]),
            (Scope::Workflow, vec![]),
        ])
        .unwrap();
        assert!(grants.offers(Scope::Subagent, "plan.update"));
        assert!(!grants.offers(Scope::Subagent, "status"));
        assert!(!grants.offers(Scope::Workflow, "memory.get"));
        assert!(grants.offers(Scope::Root, "workflow.create"));
        let refused = |p: &str| Grants::new([(Scope::Subagent, [p])]).unwrap_err();
        assert_eq!(
            refused("memory.fetch"),
            PatternError::UnknownTool(Scope::Subagent, "memory.fetch".into())
        );
        assert!(matches!(
            refused("nothing.*"),
            PatternError::MatchesNothing(..)
        ));
        assert!(matches!(refused("mem.*"), PatternError::MatchesNothing(..)));
        assert!(matches!(
            refused("subagent.run"),
            PatternError::NotGranted(..)
        ));
        for bad in ["*", "memory*", "a.b.*", ".*"] {
            assert!(matches!(refused(bad), PatternError::Malformed(..)), "{bad}");
        }
        // A family partly granted narrows to the granted part.
        let grants = Grants::new([(Scope::Subagent, ["workflow.*"])]).unwrap();
        assert!(grants.offers(Scope::Subagent, "workflow.signal"));
        assert!(!grants.offers(Scope::Subagent, "workflow.run"));
    }
}
