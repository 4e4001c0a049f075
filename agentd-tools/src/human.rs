//! `ask_human`: a question put to a person, with a JSON Schema its answer must fit, waited
//! for at most a timeout. A server's elicitation is a question of the same kind, asked by the
//! daemon for the server ([`Origin::Elicitation`]).
//!
//! A question is *open* from the moment it is asked until it is answered or withdrawn. While
//! open it is listed ([`Humans::open`]) and may be answered ([`Humans::answer`]): an answer that
//! does not fit the schema is refused ([`Error::BadAnswer`], naming the JSON pointer and the
//! rule) and the question stays open. A question whose asker stops waiting (its timeout, the
//! daemon's shutdown, or the asking future dropped) is withdrawn: it is no longer listed, and
//! answering it is `not_found`, as answering one answered already is.
//!
//! Bounds: a question's text at most [`QUESTION_MAX`] bytes, its schema at most
//! [`SCHEMA_MAX`] bytes of compact JSON (and one that compiles), an answer at most
//! [`ANSWER_MAX`] bytes of compact JSON; `ask_human` waits [`ASK_DEFAULT`] unless told, at most
//! [`DURATION_MAX_MS`](crate::DURATION_MAX_MS).

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::Error;
use crate::memory::serialized_len;
use crate::schema::parse;
use crate::wait::duration;

/// A question's largest text, in bytes.
pub const QUESTION_MAX: usize = 4096;
/// A question's largest schema, in bytes of compact JSON.
pub const SCHEMA_MAX: usize = 16 * 1024;
/// The largest answer, in bytes of compact JSON.
pub const ANSWER_MAX: usize = 16 * 1024;
/// How long `ask_human` waits when the call says nothing (300 s, as a server's elicitation).
pub const ASK_DEFAULT: Duration = Duration::from_secs(300);

/// Who asks a question.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Origin {
    /// `ask_human`, called by a unit ([`Caller::unit`](crate::Caller::unit)).
    AskHuman {
        /// The unit.
        unit: String,
    },
    /// A server's elicitation.
    Elicitation {
        /// The server, by its configured name.
        server: String,
    },
}

impl Origin {
    /// `ask_human` called by `unit`.
    pub fn ask_human(unit: &str) -> Self {
        Self::AskHuman {
            unit: unit.to_owned(),
        }
    }

    /// An elicitation of `server`.
    pub fn elicitation(server: &str) -> Self {
        Self::Elicitation {
            server: server.to_owned(),
        }
    }

    /// The origin named `kind` ([`kind`](Self::kind)) from `from` ([`from`](Self::from)), if
    /// `kind` is one.
    pub fn parse(kind: &str, from: &str) -> Option<Self> {
        match kind {
            "ask_human" => Some(Self::ask_human(from)),
            "elicitation" => Some(Self::elicitation(from)),
            _ => None,
        }
    }

    /// `ask_human` or `elicitation`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::AskHuman { .. } => "ask_human",
            Self::Elicitation { .. } => "elicitation",
        }
    }

    /// The unit or the server asking.
    pub fn from(&self) -> &str {
        match self {
            Self::AskHuman { unit } => unit,
            Self::Elicitation { server } => server,
        }
    }
}

/// An open question.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Question {
    /// Its id, unique in the instance.
    pub id: u64,
    /// Who asks.
    pub origin: Origin,
    /// What is asked.
    pub text: String,
    /// The JSON Schema its answer must fit.
    pub schema: Value,
    /// When it was asked, in Unix milliseconds.
    pub asked_ms: i64,
}

impl Question {
    /// Question `id` from `origin`, `text` with `schema`, asked at `asked_ms`.
    pub fn new(id: u64, origin: Origin, text: &str, schema: Value, asked_ms: i64) -> Self {
        Self {
            id,
            origin,
            text: text.to_owned(),
            schema,
            asked_ms,
        }
    }

    /// The question as it is listed: `{"id", "origin", "from", "question", "schema",
    /// "asked_ms"}`.
    pub fn to_value(&self) -> Value {
        json!({
            "id": self.id,
            "origin": self.origin.kind(),
            "from": self.origin.from(),
            "question": self.text,
            "schema": self.schema,
            "asked_ms": self.asked_ms,
        })
    }
}

/// How an asked question ended for its asker.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Reply {
    /// The question's id.
    pub id: u64,
    /// Its answer; `None` when it was withdrawn unanswered (its timeout, or shutdown).
    pub answer: Option<Value>,
}

impl Reply {
    /// Question `id` ended with `answer` (`None`: withdrawn unanswered).
    pub fn new(id: u64, answer: Option<Value>) -> Self {
        Self { id, answer }
    }
}

/// The instance's questions to people.
pub trait Humans: Send + Sync {
    /// Asks `text` from `origin`, its answer to fit `schema`, and waits at most `timeout` for
    /// an answer (or until shutdown). The question is open while it waits; when the wait ends
    /// unanswered, or the future is dropped, it is withdrawn. `text` and `schema` are checked
    /// ([`check_question`], [`check_schema`]).
    fn ask(
        &self,
        origin: Origin,
        text: &str,
        schema: &Value,
        timeout: Duration,
    ) -> impl Future<Output = Result<Reply, Error>> + Send;

    /// The open questions, oldest first.
    fn open(&self) -> impl Future<Output = Result<Vec<Question>, Error>> + Send;

    /// Answers open question `id` with `answer`: [`Error::NotFound`] when no question of that
    /// id is open, the refusal of [`check_answer`] when the answer does not fit (the question
    /// stays open).
    fn answer(&self, id: u64, answer: Value) -> impl Future<Output = Result<(), Error>> + Send;
}

/// Checks a question's text: at most [`QUESTION_MAX`] bytes.
pub fn check_question(text: &str) -> Result<(), Error> {
    if text.len() > QUESTION_MAX {
        return Err(Error::TooLarge {
            what: "question",
            size: text.len(),
            max: QUESTION_MAX,
        });
    }
    Ok(())
}

/// Checks a question's schema: at most [`SCHEMA_MAX`] bytes of compact JSON, and a JSON
/// Schema that compiles (no remote references).
pub fn check_schema(schema: &Value) -> Result<(), Error> {
    let size = serialized_len(schema);
    if size > SCHEMA_MAX {
        return Err(Error::TooLarge {
            what: "schema",
            size,
            max: SCHEMA_MAX,
        });
    }
    jsonschema::validator_for(schema)
        .map(drop)
        .map_err(|e| Error::invalid("ask_human", "/schema", "schema", e.to_string()))
}

/// Checks `answer` against `schema`: at most [`ANSWER_MAX`] bytes of compact JSON, and valid;
/// the first failure is [`Error::BadAnswer`], naming the JSON pointer of the value and the
/// keyword it broke.
pub fn check_answer(schema: &Value, answer: &Value) -> Result<(), Error> {
    let size = serialized_len(answer);
    if size > ANSWER_MAX {
        return Err(Error::TooLarge {
            what: "answer",
            size,
            max: ANSWER_MAX,
        });
    }
    let refused = |pointer: &str, rule: &str, message: String| Error::BadAnswer {
        pointer: pointer.to_owned(),
        rule: rule.to_owned(),
        message,
    };
    let validator = jsonschema::validator_for(schema)
        .map_err(|e| refused("", "schema", format!("the question's schema: {e}")))?;
    match validator.iter_errors(answer).next() {
        None => Ok(()),
        Some(e) => Err(refused(
            e.instance_path().as_str(),
            e.kind().keyword(),
            e.to_string(),
        )),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Ask {
    question: String,
    schema: Value,
    timeout: Option<Value>,
}

/// Runs `ask_human` for `unit`: `{"id", "answer"}`, or `{"id", "cancelled": true}` when no
/// answer came in time.
pub(crate) async fn ask(
    humans: &impl Humans,
    unit: &str,
    arguments: Value,
) -> Result<Value, Error> {
    let tool = "ask_human";
    let args: Ask = parse(tool, arguments)?;
    check_question(&args.question)?;
    check_schema(&args.schema)?;
    let timeout = match &args.timeout {
        Some(t) => duration(tool, "/timeout", t)?,
        None => ASK_DEFAULT,
    };
    let origin = Origin::ask_human(unit);
    let reply = humans
        .ask(origin, &args.question, &args.schema, timeout)
        .await?;
    Ok(match reply.answer {
        Some(answer) => json!({"id": reply.id, "answer": answer}),
        None => json!({"id": reply.id, "cancelled": true}),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schema_is_bounded_and_compiles() {
        // {"description":"…"} is 18 bytes around the text.
        let sized = |n: usize| json!({"description": "d".repeat(n - 18)});
        assert_eq!(serialized_len(&sized(SCHEMA_MAX)), SCHEMA_MAX);
        assert_eq!(check_schema(&sized(SCHEMA_MAX)), Ok(()));
        let past = check_schema(&sized(SCHEMA_MAX + 1)).unwrap_err();
        assert!(
            matches!(past, Error::TooLarge { what: "schema", size, max: SCHEMA_MAX } if size == SCHEMA_MAX + 1),
            "{past:?}"
        );
        let broken = check_schema(&json!({"type": "no such type"})).unwrap_err();
        assert!(
            matches!(&broken, Error::InvalidArguments { pointer, rule, .. } if pointer == "/schema" && rule == "schema"),
            "{broken:?}"
        );
        let remote = check_schema(&json!({"$ref": "https://example.com/s.json"}));
        assert!(remote.is_err(), "{remote:?}");
    }

    #[test]
    fn a_question_is_at_most_4096_bytes() {
        assert_eq!(check_question(&"q".repeat(QUESTION_MAX)), Ok(()));
        assert!(matches!(
            check_question(&"q".repeat(QUESTION_MAX + 1)),
            Err(Error::TooLarge {
                what: "question",
                ..
            })
        ));
    }

    #[test]
    fn an_answer_fits_its_schema_and_its_bound() {
        let schema =
            json!({"type": "object", "properties": {"n": {"type": "integer", "maximum": 3}}});
        assert_eq!(check_answer(&schema, &json!({"n": 3})), Ok(()));
        let over = check_answer(&schema, &json!({"n": 4})).unwrap_err();
        assert!(
            matches!(&over, Error::BadAnswer { pointer, rule, .. } if pointer == "/n" && rule == "maximum"),
            "{over:?}"
        );
        assert_eq!(over.code(), "bad_answer");
        assert_eq!(over.to_value()["pointer"], "/n");
        assert_eq!(over.to_value()["rule"], "maximum");
        // {"s":"…"} is 8 bytes around the text.
        let any = json!({});
        let sized = |n: usize| json!({"s": "x".repeat(n - 8)});
        assert_eq!(check_answer(&any, &sized(ANSWER_MAX)), Ok(()));
        assert!(matches!(
            check_answer(&any, &sized(ANSWER_MAX + 1)),
            Err(Error::TooLarge { what: "answer", .. })
        ));
    }

    #[test]
    fn origins_round_trip() {
        for origin in [Origin::ask_human("run:r"), Origin::elicitation("tickets")] {
            assert_eq!(Origin::parse(origin.kind(), origin.from()), Some(origin));
        }
        assert_eq!(Origin::parse("operator", "x"), None);
        let q = Question::new(3, Origin::elicitation("s"), "Name?", json!({}), 7);
        assert_eq!(
            q.to_value(),
            json!({"id": 3, "origin": "elicitation", "from": "s", "question": "Name?",
                   "schema": {}, "asked_ms": 7})
        );
    }
}
