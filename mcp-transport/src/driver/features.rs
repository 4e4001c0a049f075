//! The client features a client declares, and its answers to the server requests they serve.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use mcp_wire::{
    ClientCapabilities, ElicitMode, ElicitRequestParams, ElicitResult, ErrorObject,
    ListRootsResult, RawJson, Root, code, method,
};

/// Answers a server's `elicitation/create`: the layer above asks a person.
///
/// Any `Fn(ElicitRequestParams) -> impl Future<Output = ElicitResult>` is an elicitor:
///
/// ```
/// use std::sync::Arc;
/// use mcp_transport::driver::Elicitor;
/// use mcp_wire::{ElicitAction, ElicitRequestParams, ElicitResult};
///
/// let decline = |_: ElicitRequestParams| async { ElicitResult::new(ElicitAction::Decline) };
/// let elicitor: Arc<dyn Elicitor> = Arc::new(decline);
/// # let _ = elicitor;
/// ```
pub trait Elicitor: Send + Sync {
    /// The answer to one elicitation.
    fn elicit(
        &self,
        params: ElicitRequestParams,
    ) -> Pin<Box<dyn Future<Output = ElicitResult> + Send + '_>>;
}

impl<F, A> Elicitor for F
where
    F: Fn(ElicitRequestParams) -> A + Send + Sync,
    A: Future<Output = ElicitResult> + Send + 'static,
{
    fn elicit(
        &self,
        params: ElicitRequestParams,
    ) -> Pin<Box<dyn Future<Output = ElicitResult> + Send + '_>> {
        Box::pin(self(params))
    }
}

impl fmt::Debug for dyn Elicitor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Elicitor")
    }
}

/// What a client serves when a server asks: elicitation through an [`Elicitor`], and its
/// roots. Each is declared in the client's capabilities exactly when it is served.
///
/// ```
/// use mcp_transport::driver::ClientFeatures;
/// use mcp_wire::Root;
///
/// let features = ClientFeatures::none().with_roots(vec![Root::new("file:///src")]);
/// assert_eq!(serde_json::to_string(&features.capabilities()).unwrap(), r#"{"roots":{}}"#);
/// ```
#[derive(Debug, Clone, Default)]
pub struct ClientFeatures {
    elicitor: Option<Arc<dyn Elicitor>>,
    roots: Option<Arc<[Root]>>,
    unserved: Unserved,
}

/// What a client does with a server request on a stream that no declared feature serves
/// (sampling, tasks, or roots and elicitation when not declared).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Unserved {
    /// Answer -32601, method not found: JSON-RPC's answer (the default).
    #[default]
    MethodNotFound,
    /// Send no answer at all: the request is dropped.
    Drop,
}

/// A client's answer to one server request it serves.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Answer {
    /// An elicitation answered.
    Elicitation(ElicitResult),
    /// The roots listed.
    Roots(ListRootsResult),
    /// The request's params were malformed.
    Invalid(ErrorObject),
}

impl ClientFeatures {
    /// No features: capabilities `{}`.
    pub fn none() -> Self {
        Self::default()
    }

    /// The same features, elicitation (form mode) answered by `elicitor`.
    #[must_use]
    pub fn with_elicitor(mut self, elicitor: Arc<dyn Elicitor>) -> Self {
        self.elicitor = Some(elicitor);
        self
    }

    /// The same features, `roots/list` answered with `roots`.
    #[must_use]
    pub fn with_roots(mut self, roots: Vec<Root>) -> Self {
        self.roots = Some(roots.into());
        self
    }

    /// The same features, a request none of them serves handled as `unserved` says.
    #[must_use]
    pub fn with_unserved(mut self, unserved: Unserved) -> Self {
        self.unserved = unserved;
        self
    }

    /// What becomes of a request no feature serves.
    pub fn unserved(&self) -> Unserved {
        self.unserved
    }

    /// Who answers elicitations, if anyone.
    pub fn elicitor(&self) -> Option<&Arc<dyn Elicitor>> {
        self.elicitor.as_ref()
    }

    /// The roots, if served.
    pub fn roots(&self) -> Option<&[Root]> {
        self.roots.as_deref()
    }

    /// The capabilities that declare exactly these features.
    pub fn capabilities(&self) -> ClientCapabilities {
        let mut capabilities = ClientCapabilities::none();
        if self.elicitor.is_some() {
            capabilities = capabilities.with_elicitation();
        }
        if self.roots.is_some() {
            capabilities = capabilities.with_roots();
        }
        capabilities
    }

    /// Whether a declared feature serves requests of `method_name`.
    pub(crate) fn serves(&self, method_name: &str) -> bool {
        match method_name {
            method::ELICITATION_CREATE => self.elicitor.is_some(),
            method::ROOTS_LIST => self.roots.is_some(),
            _ => false,
        }
    }

    /// Answers a server request of `method_name`, or `None` when the client does not serve
    /// it (a method no declared feature covers).
    pub async fn answer(&self, method_name: &str, params: Option<&RawJson>) -> Option<Answer> {
        match method_name {
            method::ELICITATION_CREATE => {
                let elicitor = self.elicitor.as_ref()?;
                let parsed = params
                    .map(RawJson::parse::<ElicitRequestParams>)
                    .map(|p| p.map_err(|e| e.to_string()));
                Some(match parsed {
                    // Only form mode is declared: a URL elicitation is refused, unasked.
                    Some(Ok(params)) if params.mode() != ElicitMode::Form => {
                        Answer::Invalid(ErrorObject::new(
                            code::INVALID_PARAMS,
                            "the client declared form-mode elicitation only",
                        ))
                    }
                    Some(Ok(params)) => Answer::Elicitation(elicitor.elicit(params).await),
                    Some(Err(e)) => Answer::Invalid(ErrorObject::new(code::INVALID_PARAMS, e)),
                    None => Answer::Invalid(ErrorObject::new(
                        code::INVALID_PARAMS,
                        "elicitation/create without params",
                    )),
                })
            }
            method::ROOTS_LIST => {
                let roots = self.roots.as_ref()?;
                Some(Answer::Roots(ListRootsResult::new(roots.to_vec())))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use mcp_wire::ElicitAction;

    use super::*;

    fn raw(text: &str) -> RawJson {
        RawJson::from_text(text).unwrap()
    }

    fn declining() -> ClientFeatures {
        let decline = |_: ElicitRequestParams| async { ElicitResult::new(ElicitAction::Decline) };
        ClientFeatures::none().with_elicitor(Arc::new(decline))
    }

    #[tokio::test]
    async fn only_what_is_declared_is_served() {
        let none = ClientFeatures::none();
        let form = raw(r#"{"message":"Name?","requestedSchema":{"type":"object"}}"#);
        assert_eq!(none.answer("elicitation/create", Some(&form)).await, None);
        assert_eq!(none.answer("roots/list", None).await, None);
        assert_eq!(none.answer("sampling/createMessage", None).await, None);

        let features = declining().with_roots(vec![Root::new("file:///src")]);
        assert_eq!(
            features.answer("elicitation/create", Some(&form)).await,
            Some(Answer::Elicitation(ElicitResult::new(
                ElicitAction::Decline
            )))
        );
        assert_eq!(
            features.answer("roots/list", Some(&raw("{}"))).await,
            Some(Answer::Roots(ListRootsResult::new(vec![Root::new(
                "file:///src"
            )])))
        );
        assert_eq!(features.answer("sampling/createMessage", None).await, None);
    }

    #[tokio::test]
    async fn an_elicitation_the_client_cannot_take_is_invalid_params() {
        let features = declining();
        let url = raw(
            r#"{"mode":"url","message":"Open","url":"https://example.com","elicitationId":"e"}"#,
        );
        for params in [None, Some(raw(r#"{"nope":1}"#)), Some(url)] {
            let answer = features.answer("elicitation/create", params.as_ref()).await;
            assert!(
                matches!(&answer, Some(Answer::Invalid(e)) if e.code == code::INVALID_PARAMS),
                "{params:?}: {answer:?}"
            );
        }
    }
}
