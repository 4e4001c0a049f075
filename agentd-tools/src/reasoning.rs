//! `think`, `decide` and `context.compact`: the model-only tools. The model calls them in a
//! turn, and each asks the model again, over the turn's context ([`Reasoning`], which the
//! daemon implements over its model provider for each round of a turn):
//!
//! - `think` (`{"prompt", "schema"?}`): one completion with no tools, shown the context the
//!   model was shown and the prompt; its text comes back as `{"thought"}`. With a `schema`
//!   (a JSON Schema of an object), the model is asked for a JSON object fitting it, which
//!   comes back as `"answer"` too; one that is not JSON or does not fit is `bad_answer`.
//! - `decide` (`{"questions", "context"?}`): at most [`QUESTIONS_MAX`] typed questions, each
//!   `{"id", "question", "type"}`: `boolean`, `number`, `text`, or `choice` among its
//!   `options` (two or more, only for a choice). The model answers each with a confidence in
//!   0..=1; every answer is checked against its question's type, and one that does not fit
//!   (missing, of another type, not an option, a confidence out of range, an id asked for
//!   nothing) is `bad_answer`, naming where (`/answers/<i>/answer`) and the rule. It comes
//!   back as `{"answers": [{"id", "answer", "confidence"}]}`, in the questions' order.
//! - `context.compact` (`{"keep"?, "instructions"?}`): the older messages of the context, all
//!   but the last `keep` ([`KEEP_DEFAULT`] unless told), are replaced in it by a summary the
//!   model writes of them ([`compaction_prompt`]); the conversation's stored history keeps
//!   them all. It comes back as `{"replaced", "kept", "summary"}` (`summary` null when there
//!   was nothing to replace).
//!
//! Outside a turn (an operator's call, say) there is no context: the runtime answers
//! `model_only` ([`Error::ModelOnly`]).

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::Error;
use crate::schema::parse;

pub use crate::schema::QUESTIONS_MAX;

/// How many of the latest messages `context.compact` keeps when not told.
pub const KEEP_DEFAULT: usize = 8;

/// The tools of this module.
pub const TOOLS: [&str; 3] = ["think", "decide", "context.compact"];

/// Whether `tool` is one of the model-only tools.
pub fn is_reasoning(tool: &str) -> bool {
    TOOLS.contains(&tool)
}

/// A future the [`Reasoning`] service answers with.
pub type Answer<'a, T> = Pin<Box<dyn Future<Output = Result<T, Error>> + Send + 'a>>;

/// What `context.compact` did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Compacted {
    /// How many messages of the conversation the summary replaces now, earlier summaries'
    /// included.
    pub replaced: usize,
    /// How many messages are shown after it.
    pub kept: usize,
    /// The summary, none when nothing was replaced.
    pub summary: Option<String>,
}

impl Compacted {
    /// `replaced` messages replaced by `summary`, `kept` shown after it.
    pub fn new(replaced: usize, kept: usize, summary: Option<String>) -> Self {
        Self {
            replaced,
            kept,
            summary,
        }
    }
}

/// The model of a turn, over the context it was shown in the round whose call is answered.
pub trait Reasoning: Send + Sync {
    /// One completion offering no tools: the model is shown its context, then `prompt` as
    /// the user's; its text. [`Error::Model`] when the model fails.
    fn ask<'a>(&'a self, prompt: &'a str) -> Answer<'a, String>;

    /// Replaces in the context the messages before the last `keep` (never splitting a call
    /// from its results) by a summary the model writes of them, asked with `prompt` (the
    /// summary shown so far is summarized with them); nothing is asked when no message
    /// would be replaced. The stored history keeps every message.
    fn compact<'a>(&'a self, keep: usize, prompt: &'a str) -> Answer<'a, Compacted>;
}

/// The prompt `context.compact` asks the model's summary with, following `instructions`.
pub fn compaction_prompt(instructions: Option<&str>) -> String {
    let mut prompt = String::from(
        "Summarize the conversation below for your own later use. Keep every fact, \
         decision, name, number, tool result and open question a later turn may need; leave \
         out greetings and repetition. Answer with the summary alone.",
    );
    if let Some(instructions) = instructions {
        prompt.push_str("\n\nFollow these instructions too: ");
        prompt.push_str(instructions);
    }
    prompt
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Think {
    prompt: String,
    schema: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Decide {
    questions: Vec<Question>,
    context: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Question {
    id: String,
    question: String,
    #[serde(rename = "type")]
    kind: Kind,
    options: Option<Vec<String>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
enum Kind {
    Boolean,
    Choice,
    Number,
    Text,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Compact {
    keep: Option<usize>,
    instructions: Option<String>,
}

/// Runs `think`, `decide` or `context.compact` over `reasoning`.
pub(crate) async fn call(
    reasoning: &dyn Reasoning,
    name: &str,
    arguments: Value,
) -> Result<Value, Error> {
    match name {
        "think" => {
            let args: Think = parse(name, arguments)?;
            think(reasoning, args).await
        }
        "decide" => {
            let args: Decide = parse(name, arguments)?;
            decide(reasoning, args).await
        }
        "context.compact" => {
            let args: Compact = parse(name, arguments)?;
            let keep = args.keep.unwrap_or(KEEP_DEFAULT);
            let prompt = compaction_prompt(args.instructions.as_deref());
            let done = reasoning.compact(keep, &prompt).await?;
            Ok(json!({"replaced": done.replaced, "kept": done.kept, "summary": done.summary}))
        }
        _ => Err(Error::UnknownTool {
            tool: name.to_owned(),
        }),
    }
}

async fn think(reasoning: &dyn Reasoning, args: Think) -> Result<Value, Error> {
    let Some(schema) = args.schema else {
        let thought = reasoning.ask(&args.prompt).await?;
        return Ok(json!({"thought": thought}));
    };
    let validator = jsonschema::validator_for(&schema).map_err(|e| {
        Error::invalid(
            "think",
            "/schema",
            "schema",
            format!("not a JSON Schema: {e}"),
        )
    })?;
    let prompt = format!(
        "{}\n\nAnswer with one JSON object alone, fitting this JSON Schema:\n{schema}",
        args.prompt
    );
    let thought = reasoning.ask(&prompt).await?;
    let answer = json_in(&thought).ok_or_else(|| Error::BadAnswer {
        pointer: String::new(),
        rule: "json".to_owned(),
        message: "the model's answer holds no JSON object".to_owned(),
    })?;
    if let Some(e) = validator.iter_errors(&answer).next() {
        return Err(Error::BadAnswer {
            pointer: e.instance_path().as_str().to_owned(),
            rule: e.kind().keyword().to_owned(),
            message: e.to_string(),
        });
    }
    Ok(json!({"thought": thought, "answer": answer}))
}

async fn decide(reasoning: &dyn Reasoning, args: Decide) -> Result<Value, Error> {
    check_questions(&args.questions)?;
    let asked: Vec<Value> = args
        .questions
        .iter()
        .map(|q| {
            let mut asked = json!({"id": q.id, "question": q.question, "type": q.kind});
            if let Some(options) = &q.options {
                asked["options"] = json!(options);
            }
            asked
        })
        .collect();
    let mut prompt = String::from(
        "Decide each question below. Answer with one JSON object alone: \
         {\"answers\": [{\"id\": <the question's id>, \"answer\": <your answer>, \
         \"confidence\": <the probability, from 0 to 1, that your answer is right>}]}, one \
         answer per question. A boolean question is answered true or false, a number \
         question with a JSON number, a text question with a string, a choice question with \
         exactly one of its options. Be calibrated: a confidence of 0.8 should be right four \
         times in five.",
    );
    if let Some(context) = &args.context {
        prompt.push_str("\n\nContext: ");
        prompt.push_str(context);
    }
    prompt.push_str("\n\nQuestions: ");
    prompt.push_str(&Value::Array(asked).to_string());
    let said = reasoning.ask(&prompt).await?;
    let answers = checked(&args.questions, &said)?;
    Ok(json!({"answers": answers}))
}

/// The questions' own rules, past their schema (which bounds them at [`QUESTIONS_MAX`]): ids
/// once each, options for a choice and for nothing else.
fn check_questions(questions: &[Question]) -> Result<(), Error> {
    let tool = "decide";
    let mut ids = BTreeSet::new();
    for (i, q) in questions.iter().enumerate() {
        if !ids.insert(q.id.as_str()) {
            let message = format!("the id {:?} is asked twice", q.id);
            return Err(Error::invalid(
                tool,
                &format!("/questions/{i}/id"),
                "unique",
                message,
            ));
        }
        match (q.kind, &q.options) {
            (Kind::Choice, None) => {
                return Err(Error::invalid(
                    tool,
                    &format!("/questions/{i}"),
                    "options",
                    "a choice lists its options",
                ));
            }
            (Kind::Choice, Some(_)) | (_, None) => {}
            (_, Some(_)) => {
                return Err(Error::invalid(
                    tool,
                    &format!("/questions/{i}/options"),
                    "options",
                    "only a choice has options",
                ));
            }
        }
    }
    Ok(())
}

/// The answers the model `said` to `questions`, each checked against its type, in the
/// questions' order.
fn checked(questions: &[Question], said: &str) -> Result<Vec<Value>, Error> {
    let bad = |pointer: String, rule: &str, message: String| Error::BadAnswer {
        pointer,
        rule: rule.to_owned(),
        message,
    };
    let given = json_in(said).ok_or_else(|| {
        bad(
            String::new(),
            "json",
            "the model's answer holds no JSON object".into(),
        )
    })?;
    let Some(given) = given["answers"].as_array() else {
        let message = "the model's answer has no array \"answers\"".to_owned();
        return Err(bad("/answers".into(), "type", message));
    };
    let mut answers = vec![Value::Null; questions.len()];
    for (i, answer) in given.iter().enumerate() {
        let at = |key: &str| format!("/answers/{i}/{key}");
        let id = answer["id"].as_str().unwrap_or_default();
        let Some(q) = questions.iter().position(|q| q.id == id) else {
            let message = format!("no question has the id {id:?}");
            return Err(bad(at("id"), "enum", message));
        };
        if !answers[q].is_null() {
            return Err(bad(at("id"), "unique", format!("{id:?} is answered twice")));
        }
        let question = &questions[q];
        let value = &answer["answer"];
        let fits = match question.kind {
            Kind::Boolean => value.is_boolean(),
            Kind::Number => value.is_number(),
            Kind::Text => value.is_string(),
            Kind::Choice => value
                .as_str()
                .is_some_and(|v| question.options.iter().flatten().any(|option| option == v)),
        };
        if !fits {
            let (rule, wanted) = match question.kind {
                Kind::Boolean => ("type", "true or false".to_owned()),
                Kind::Number => ("type", "a number".to_owned()),
                Kind::Text => ("type", "a string".to_owned()),
                Kind::Choice => ("enum", format!("one of {:?}", question.options)),
            };
            let message = format!("{id:?} is answered {value}, not {wanted}");
            return Err(bad(at("answer"), rule, message));
        }
        let confidence = answer["confidence"]
            .as_f64()
            .filter(|c| (0.0..=1.0).contains(c));
        let Some(confidence) = confidence else {
            let message = format!("{id:?} has confidence {}, not 0..=1", answer["confidence"]);
            return Err(bad(at("confidence"), "range", message));
        };
        answers[q] = json!({"id": id, "answer": value, "confidence": confidence});
    }
    if let Some(q) = answers.iter().position(Value::is_null) {
        let message = format!("{:?} is not answered", questions[q].id);
        return Err(bad("/answers".into(), "required", message));
    }
    Ok(answers)
}

/// The JSON object in a model's text: the whole text, or from its first `{` to its last `}`
/// (a model may fence it, or say something around it).
fn json_in(text: &str) -> Option<Value> {
    let parsed = |t: &str| {
        serde_json::from_str::<Value>(t)
            .ok()
            .filter(Value::is_object)
    };
    if let Some(value) = parsed(text.trim()) {
        return Some(value);
    }
    let (start, end) = (text.find('{')?, text.rfind('}')?);
    (start < end).then(|| parsed(&text[start..=end])).flatten()
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::schema::assert_answer;

    /// A model answering from a list, recording what it was asked.
    #[derive(Default)]
    struct Said {
        answers: Mutex<Vec<String>>,
        asked: Mutex<Vec<String>>,
    }

    impl Said {
        fn new(answers: &[&str]) -> Self {
            let answers = answers.iter().rev().map(|a| (*a).to_owned()).collect();
            Self {
                answers: Mutex::new(answers),
                asked: Mutex::default(),
            }
        }
    }

    impl Reasoning for Said {
        fn ask<'a>(&'a self, prompt: &'a str) -> Answer<'a, String> {
            self.asked.lock().unwrap().push(prompt.to_owned());
            let answer = self.answers.lock().unwrap().pop();
            Box::pin(async move {
                answer.ok_or(Error::Model {
                    detail: "the script is over".into(),
                })
            })
        }

        fn compact<'a>(&'a self, keep: usize, prompt: &'a str) -> Answer<'a, Compacted> {
            self.asked.lock().unwrap().push(prompt.to_owned());
            Box::pin(async move { Ok(Compacted::new(10 - keep, keep, Some("sum".into()))) })
        }
    }

    async fn run(said: &Said, name: &str, arguments: Value) -> Result<Value, Error> {
        crate::tool(name).unwrap().check(&arguments)?;
        let answer = call(said, name, arguments).await;
        if let Ok(answer) = &answer {
            assert_answer(name, answer);
        }
        answer
    }

    fn questions() -> Value {
        json!([
            {"id": "go", "question": "Deploy?", "type": "boolean"},
            {"id": "env", "question": "Where?", "type": "choice", "options": ["staging", "prod"]},
            {"id": "n", "question": "How many?", "type": "number"},
            {"id": "why", "question": "Why?", "type": "text"},
        ])
    }

    #[tokio::test]
    async fn think_answers_text_or_an_object_fitting_its_schema() {
        let said = Said::new(&[
            "Step one, then two.",
            "```json\n{\"n\": 3}\n```",
            "{\"n\": \"3\"}",
            "no",
        ]);
        let thought = run(&said, "think", json!({"prompt": "Plan it"}))
            .await
            .unwrap();
        assert_eq!(thought, json!({"thought": "Step one, then two."}));
        assert_eq!(said.asked.lock().unwrap()[0], "Plan it");
        let schema =
            json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
        let args = json!({"prompt": "How many?", "schema": schema});
        let answered = run(&said, "think", args.clone()).await.unwrap();
        assert_eq!(answered["answer"], json!({"n": 3}));
        assert!(said.asked.lock().unwrap()[1].contains("JSON Schema"));
        let wrong = run(&said, "think", args.clone()).await.unwrap_err();
        assert!(
            matches!(&wrong, Error::BadAnswer { pointer, rule, .. } if pointer == "/n" && rule == "type"),
            "{wrong:?}"
        );
        let none = run(&said, "think", args).await.unwrap_err();
        assert!(
            matches!(&none, Error::BadAnswer { rule, .. } if rule == "json"),
            "{none:?}"
        );
        let failed = run(&said, "think", json!({"prompt": "more"}))
            .await
            .unwrap_err();
        assert_eq!(failed.code(), "model");
        let bad_schema = json!({"prompt": "p", "schema": {"type": "nope"}});
        let e = run(&said, "think", bad_schema).await.unwrap_err();
        assert!(
            matches!(&e, Error::InvalidArguments { pointer, .. } if pointer == "/schema"),
            "{e:?}"
        );
    }

    #[tokio::test]
    async fn decide_checks_every_answer_against_its_type() {
        let good = json!({"answers": [
            {"id": "env", "answer": "staging", "confidence": 0.7},
            {"id": "go", "answer": true, "confidence": 0.9},
            {"id": "why", "answer": "tests pass", "confidence": 1},
            {"id": "n", "answer": 2.5, "confidence": 0},
        ]})
        .to_string();
        let said = Said::new(&[&good]);
        let decided = run(
            &said,
            "decide",
            json!({"questions": questions(), "context": "ctx"}),
        );
        let decided = decided.await.unwrap();
        let ids: Vec<&str> = decided["answers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["go", "env", "n", "why"], "in the questions' order");
        assert_eq!(decided["answers"][1]["answer"], "staging");
        let asked = said.asked.lock().unwrap()[0].clone();
        assert!(
            asked.contains("Context: ctx") && asked.contains("\"prod\""),
            "{asked}"
        );

        // Each wrong answer is a typed error naming where and the rule.
        let wrong = |answer: Value, confidence: Value, id: &str| {
            let mut answers: Vec<Value> = ["go", "env", "n", "why"]
                .iter()
                .map(|i| {
                    let a = match *i {
                        "go" => json!(false),
                        "env" => json!("prod"),
                        "n" => json!(1),
                        _ => json!("x"),
                    };
                    json!({"id": i, "answer": a, "confidence": 0.5})
                })
                .collect();
            let at = answers.iter().position(|a| a["id"] == id).unwrap();
            answers[at]["answer"] = answer;
            answers[at]["confidence"] = confidence;
            json!({"answers": answers}).to_string()
        };
        let cases = [
            (
                wrong(json!("yes"), json!(0.5), "go"),
                "/answers/0/answer",
                "type",
            ),
            (
                wrong(json!("dev"), json!(0.5), "env"),
                "/answers/1/answer",
                "enum",
            ),
            (
                wrong(json!("2"), json!(0.5), "n"),
                "/answers/2/answer",
                "type",
            ),
            (
                wrong(json!(3), json!(0.5), "why"),
                "/answers/3/answer",
                "type",
            ),
            (
                wrong(json!(true), json!(1.5), "go"),
                "/answers/0/confidence",
                "range",
            ),
            (
                wrong(json!(true), json!(-0.1), "go"),
                "/answers/0/confidence",
                "range",
            ),
            (
                wrong(json!(true), json!(null), "go"),
                "/answers/0/confidence",
                "range",
            ),
            (
                json!({"answers": [{"id": "go", "answer": true, "confidence": 1}]}).to_string(),
                "/answers",
                "required",
            ),
            (
                json!({"answers": [{"id": "x", "answer": true, "confidence": 1}]}).to_string(),
                "/answers/0/id",
                "enum",
            ),
            (json!({"answer": []}).to_string(), "/answers", "type"),
            ("I think yes".to_owned(), "", "json"),
        ];
        for (said_text, pointer, rule) in cases {
            let said = Said::new(&[&said_text]);
            let e = run(&said, "decide", json!({"questions": questions()}))
                .await
                .unwrap_err();
            assert_eq!(e.code(), "bad_answer");
            assert!(
                matches!(&e, Error::BadAnswer { pointer: p, rule: r, .. } if p == pointer && r == rule),
                "{said_text}: {e:?}"
            );
        }
    }

    #[tokio::test]
    async fn decide_refuses_questions_it_cannot_ask() {
        let said = Said::new(&[]);
        let twice = json!([
            {"id": "a", "question": "?", "type": "boolean"},
            {"id": "a", "question": "?", "type": "number"},
        ]);
        let choice = json!([{"id": "a", "question": "?", "type": "choice"}]);
        let options = json!([{"id": "a", "question": "?", "type": "text", "options": ["x", "y"]}]);
        for (questions, pointer) in [
            (twice, "/questions/1/id"),
            (choice, "/questions/0"),
            (options, "/questions/0/options"),
        ] {
            let e = run(&said, "decide", json!({"questions": questions}))
                .await
                .unwrap_err();
            assert!(
                matches!(&e, Error::InvalidArguments { pointer: p, .. } if p == pointer),
                "{e:?}"
            );
        }
        // At the bound, and one past it.
        let many = |n: usize| -> Value {
            (0..n)
                .map(|i| json!({"id": format!("q{i}"), "question": "?", "type": "boolean"}))
                .collect()
        };
        let e = run(
            &said,
            "decide",
            json!({"questions": many(QUESTIONS_MAX + 1)}),
        )
        .await;
        assert_eq!(e.unwrap_err().code(), "invalid_arguments");
        let answers: Vec<Value> = (0..QUESTIONS_MAX)
            .map(|i| json!({"id": format!("q{i}"), "answer": true, "confidence": 1}))
            .collect();
        let said = Said::new(&[&json!({"answers": answers}).to_string()]);
        let e = run(&said, "decide", json!({"questions": many(QUESTIONS_MAX)})).await;
        assert_eq!(
            e.unwrap()["answers"].as_array().unwrap().len(),
            QUESTIONS_MAX
        );
        assert!(said.asked.lock().unwrap().len() == 1);
    }

    #[tokio::test]
    async fn compact_asks_with_the_instructions_and_says_what_it_replaced() {
        let said = Said::new(&[]);
        let done = run(&said, "context.compact", json!({})).await.unwrap();
        assert_eq!(
            done,
            json!({"replaced": 10 - KEEP_DEFAULT, "kept": KEEP_DEFAULT, "summary": "sum"})
        );
        let args = json!({"keep": 2, "instructions": "keep the ticket ids"});
        let done = run(&said, "context.compact", args).await.unwrap();
        assert_eq!(done["kept"], 2);
        let asked = said.asked.lock().unwrap().clone();
        assert_eq!(asked[0], compaction_prompt(None));
        assert!(asked[1].ends_with("Follow these instructions too: keep the ticket ids"));
    }
}
