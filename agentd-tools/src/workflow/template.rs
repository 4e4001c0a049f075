//! Templates: the arguments of a step read from the run's input and earlier steps' outputs.
//!
//! A template is `{{` a path `}}` inside a JSON string. A path starts at one of three roots:
//! `input` (the run's input), `steps.<id>.output` (the output of an earlier step) or
//! `run.id` / `run.workflow`; then keys (`.city`) and array indexes (`[0]`) walk into the JSON
//! value. A string that is one template alone becomes the value at its path, whatever its
//! type; a string with text around its templates, or several of them, becomes a string (a
//! string value as it is, any other value as compact JSON). There is nothing else: no
//! expressions, no functions, no escapes.
//!
//! ```
//! use agentd_tools::workflow::template::{Context, Template};
//! use serde_json::json;
//!
//! let t = Template::parse("{{steps.fetch.output.content[0].text}}").unwrap();
//! let fetched = json!({"content": [{"type": "text", "text": "sunny"}]});
//! let input = json!({"city": "Oslo"});
//! let cx = Context::new(&input, "run-1", "weather").step("fetch", &fetched);
//! assert_eq!(t.render(&cx).unwrap(), json!("sunny"));
//!
//! let t = Template::parse("weather in {{input.city}}").unwrap();
//! assert_eq!(t.render(&cx).unwrap(), json!("weather in Oslo"));
//! ```
//!
//! Bounds: an expression (what is between the braces) is at most [`EXPRESSION_MAX`] bytes and
//! at most [`SEGMENTS_MAX`] segments.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::{Map, Value};

/// The longest expression between `{{` and `}}`, in bytes.
pub const EXPRESSION_MAX: usize = 256;
/// The most segments of a path (`steps.fetch.output.content[0].text` is six).
pub const SEGMENTS_MAX: usize = 32;

/// One segment of a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    /// A key of an object (`.city`).
    Key(String),
    /// An index of an array (`[0]`).
    Index(usize),
}

/// A path into the run's values: `input…`, `steps.<id>.output…` or `run.id` /
/// `run.workflow`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Path {
    text: String,
    segments: Vec<Segment>,
}

impl Path {
    /// The path as written, without the braces.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The step whose output it reads, if it reads one.
    pub fn step(&self) -> Option<&str> {
        match self.segments.as_slice() {
            [Segment::Key(root), Segment::Key(id), ..] if root == "steps" => Some(id),
            _ => None,
        }
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{{{{{}}}}}", self.text)
    }
}

/// Why a template is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TemplateError {
    /// A `{{` without its `}}`, or a `}}` without its `{{`.
    Unclosed,
    /// Nothing between the braces.
    Empty,
    /// An expression past [`EXPRESSION_MAX`] bytes.
    TooLong {
        /// Its length.
        len: usize,
    },
    /// A path past [`SEGMENTS_MAX`] segments.
    TooDeep {
        /// How many it has.
        segments: usize,
    },
    /// Not a path: what was expected at a byte of the expression.
    Syntax {
        /// The expression.
        expression: String,
        /// The byte offset in it.
        at: usize,
        /// What was expected there.
        expected: &'static str,
    },
    /// A path that starts at none of `input`, `steps`, `run`.
    UnknownRoot {
        /// The path.
        path: String,
    },
    /// `steps.<id>` naming no step of the workflow.
    UnknownStep {
        /// The path.
        path: String,
        /// The step it names.
        step: String,
    },
    /// `steps.<id>` naming this step or a later one, whose output is not there yet.
    LaterStep {
        /// The path.
        path: String,
        /// The step it names.
        step: String,
    },
    /// `steps.<id>` not followed by `.output`.
    NotOutput {
        /// The path.
        path: String,
    },
    /// `run.` followed by other than `id` or `workflow`.
    RunField {
        /// The path.
        path: String,
    },
}

impl fmt::Display for TemplateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unclosed => f.write_str("a {{ without its }}, or a }} without its {{"),
            Self::Empty => f.write_str("nothing between {{ and }}"),
            Self::TooLong { len } => {
                write!(f, "an expression of {len} bytes is past {EXPRESSION_MAX}")
            }
            Self::TooDeep { segments } => {
                write!(f, "a path of {segments} segments is past {SEGMENTS_MAX}")
            }
            Self::Syntax {
                expression,
                at,
                expected,
            } => write!(f, "{{{{{expression}}}}}: {expected} expected at byte {at}"),
            Self::UnknownRoot { path } => write!(
                f,
                "{{{{{path}}}}} starts at none of input, steps.<id>.output, run"
            ),
            Self::UnknownStep { path, step } => {
                write!(f, "{{{{{path}}}}}: no step is named {step:?}")
            }
            Self::LaterStep { path, step } => write!(
                f,
                "{{{{{path}}}}}: step {step:?} does not run before this one"
            ),
            Self::NotOutput { path } => {
                write!(f, "{{{{{path}}}}}: a step is read as steps.<id>.output")
            }
            Self::RunField { path } => write!(f, "{{{{{path}}}}}: run has id and workflow"),
        }
    }
}

impl std::error::Error for TemplateError {}

/// Why a template has no value in a run.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RenderError {
    /// Nothing is at the path: a missing key, an index past the end, or a step without
    /// output.
    Missing {
        /// The path.
        path: String,
    },
}

impl fmt::Display for RenderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Missing { path } => write!(f, "{{{{{path}}}}} holds nothing in this run"),
        }
    }
}

impl std::error::Error for RenderError {}

/// A piece of a template string.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(String),
    Path(Path),
}

/// A string parsed as text and paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    pieces: Vec<Piece>,
}

/// The values a template reads: the run's input, id and workflow, and the outputs of the
/// steps that ran.
#[derive(Debug, Clone)]
pub struct Context<'a> {
    input: &'a Value,
    run: Value,
    outputs: BTreeMap<&'a str, &'a Value>,
}

impl<'a> Context<'a> {
    /// The context of run `id` of `workflow` with `input`, before any step's output.
    pub fn new(input: &'a Value, id: &str, workflow: &str) -> Self {
        let mut run = Map::new();
        run.insert("id".into(), id.into());
        run.insert("workflow".into(), workflow.into());
        Self {
            input,
            run: Value::Object(run),
            outputs: BTreeMap::new(),
        }
    }

    /// The same, with step `id`'s output.
    pub fn step(mut self, id: &'a str, output: &'a Value) -> Self {
        self.outputs.insert(id, output);
        self
    }

    /// The value at `path`, if any.
    fn get(&self, path: &Path) -> Option<&Value> {
        let (root, rest) = match path.segments.as_slice() {
            [Segment::Key(root), rest @ ..] if root == "input" => (self.input, rest),
            [Segment::Key(root), rest @ ..] if root == "run" => (&self.run, rest),
            [
                Segment::Key(root),
                Segment::Key(id),
                Segment::Key(out),
                rest @ ..,
            ] if root == "steps" && out == "output" => (*self.outputs.get(id.as_str())?, rest),
            _ => return None,
        };
        rest.iter().try_fold(root, |at, segment| match segment {
            Segment::Key(key) => at.get(key),
            Segment::Index(i) => at.get(*i),
        })
    }
}

impl Template {
    /// Parses `text`: its pieces of text and its paths (each checked for its syntax and
    /// bounds, not for what it names: see [`check`](Self::check)).
    pub fn parse(text: &str) -> Result<Self, TemplateError> {
        let mut pieces = Vec::new();
        let mut rest = text;
        while let Some(open) = rest.find("{{") {
            let before = &rest[..open];
            if before.contains("}}") {
                return Err(TemplateError::Unclosed);
            }
            if !before.is_empty() {
                pieces.push(Piece::Text(before.to_owned()));
            }
            let inside = &rest[open + 2..];
            let close = inside.find("}}").ok_or(TemplateError::Unclosed)?;
            pieces.push(Piece::Path(path(&inside[..close])?));
            rest = &inside[close + 2..];
        }
        if rest.contains("}}") {
            return Err(TemplateError::Unclosed);
        }
        if !rest.is_empty() {
            pieces.push(Piece::Text(rest.to_owned()));
        }
        Ok(Self { pieces })
    }

    /// Whether it holds a path (else it is plain text).
    pub fn has_paths(&self) -> bool {
        self.paths().next().is_some()
    }

    /// Its paths, in order.
    pub fn paths(&self) -> impl Iterator<Item = &Path> {
        self.pieces.iter().filter_map(|p| match p {
            Piece::Path(path) => Some(path),
            Piece::Text(_) => None,
        })
    }

    /// Checks what its paths name, for a step whose earlier steps are `before` and whose
    /// later steps (itself included) are `after`.
    pub fn check(&self, before: &[&str], after: &[&str]) -> Result<(), TemplateError> {
        self.paths().try_for_each(|p| check_path(p, before, after))
    }

    /// Its value in `cx`: the value at its path when it is one path alone, else a string.
    pub fn render(&self, cx: &Context<'_>) -> Result<Value, RenderError> {
        let value = |path: &Path| {
            cx.get(path).ok_or_else(|| RenderError::Missing {
                path: path.text.clone(),
            })
        };
        if let [Piece::Path(path)] = self.pieces.as_slice() {
            return value(path).cloned();
        }
        let mut out = String::new();
        for piece in &self.pieces {
            match piece {
                Piece::Text(text) => out.push_str(text),
                Piece::Path(path) => match value(path)? {
                    Value::String(s) => out.push_str(s),
                    other => out.push_str(&other.to_string()),
                },
            }
        }
        Ok(Value::String(out))
    }
}

/// Checks every template in the strings of `value` (keys are not templates); the JSON
/// pointer under `at` of the first refused, and why.
pub fn check_value(
    value: &Value,
    at: &str,
    before: &[&str],
    after: &[&str],
) -> Result<(), (String, TemplateError)> {
    match value {
        Value::String(text) => Template::parse(text)
            .and_then(|t| t.check(before, after))
            .map_err(|e| (at.to_owned(), e)),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .try_for_each(|(i, v)| check_value(v, &format!("{at}/{i}"), before, after)),
        Value::Object(members) => members
            .iter()
            .try_for_each(|(k, v)| check_value(v, &format!("{at}/{}", escape(k)), before, after)),
        _ => Ok(()),
    }
}

/// `value` with every template in its strings rendered in `cx`; the JSON pointer (under
/// `at`) of the first that has no value, and why.
pub fn render_value(
    value: &Value,
    at: &str,
    cx: &Context<'_>,
) -> Result<Value, (String, RenderError)> {
    Ok(match value {
        Value::String(text) => {
            // Checked when the workflow was defined: a string that does not parse now is
            // taken as it is.
            match Template::parse(text) {
                Ok(t) => t.render(cx).map_err(|e| (at.to_owned(), e))?,
                Err(_) => value.clone(),
            }
        }
        Value::Array(items) => Value::Array(
            items
                .iter()
                .enumerate()
                .map(|(i, v)| render_value(v, &format!("{at}/{i}"), cx))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(members) => Value::Object(
            members
                .iter()
                .map(|(k, v)| {
                    let rendered = render_value(v, &format!("{at}/{}", escape(k)), cx)?;
                    Ok((k.clone(), rendered))
                })
                .collect::<Result<_, _>>()?,
        ),
        other => other.clone(),
    })
}

/// A key as a JSON pointer token.
fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// Whether `c` may be in a key or a step's id.
pub(crate) fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// Parses the expression between the braces.
fn path(expression: &str) -> Result<Path, TemplateError> {
    if expression.len() > EXPRESSION_MAX {
        return Err(TemplateError::TooLong {
            len: expression.len(),
        });
    }
    let text = expression.trim();
    if text.is_empty() {
        return Err(TemplateError::Empty);
    }
    let lead = expression.len() - expression.trim_start().len();
    let syntax = |at: usize, expected| TemplateError::Syntax {
        expression: expression.to_owned(),
        at: lead + at,
        expected,
    };
    let bytes = text.as_bytes();
    let mut segments = Vec::new();
    let key = |i: usize| {
        let len = text[i..]
            .find(|c: char| !is_name_char(c))
            .unwrap_or(text.len() - i);
        (len > 0).then(|| (text[i..i + len].to_owned(), i + len))
    };
    let (root, next) = key(0).ok_or_else(|| syntax(0, "a name"))?;
    segments.push(Segment::Key(root));
    let mut i = next;
    while i < bytes.len() {
        match bytes[i] {
            b'.' => {
                let (k, next) = key(i + 1).ok_or_else(|| syntax(i + 1, "a name"))?;
                segments.push(Segment::Key(k));
                i = next;
            }
            b'[' => {
                let digits = text[i + 1..]
                    .find(|c: char| !c.is_ascii_digit())
                    .unwrap_or(text.len() - i - 1);
                let end = i + 1 + digits;
                if digits == 0 {
                    return Err(syntax(i + 1, "an index"));
                }
                if bytes.get(end) != Some(&b']') {
                    return Err(syntax(end, "]"));
                }
                let index = text[i + 1..end]
                    .parse()
                    .map_err(|_| syntax(i + 1, "an index"))?;
                segments.push(Segment::Index(index));
                i = end + 1;
            }
            _ => return Err(syntax(i, ". or [")),
        }
        if segments.len() > SEGMENTS_MAX {
            return Err(TemplateError::TooDeep {
                segments: segments.len(),
            });
        }
    }
    Ok(Path {
        text: text.to_owned(),
        segments,
    })
}

/// Checks what `path` names.
fn check_path(path: &Path, before: &[&str], after: &[&str]) -> Result<(), TemplateError> {
    let text = || path.text.clone();
    match path.segments.as_slice() {
        [Segment::Key(root), ..] if root == "input" => Ok(()),
        [Segment::Key(root), Segment::Key(field)] if root == "run" => match field.as_str() {
            "id" | "workflow" => Ok(()),
            _ => Err(TemplateError::RunField { path: text() }),
        },
        [Segment::Key(root), ..] if root == "run" => Err(TemplateError::RunField { path: text() }),
        [Segment::Key(root), Segment::Key(id), rest @ ..] if root == "steps" => {
            let step = id.clone();
            if after.contains(&id.as_str()) {
                return Err(TemplateError::LaterStep { path: text(), step });
            }
            if !before.contains(&id.as_str()) {
                return Err(TemplateError::UnknownStep { path: text(), step });
            }
            match rest.first() {
                Some(Segment::Key(out)) if out == "output" => Ok(()),
                _ => Err(TemplateError::NotOutput { path: text() }),
            }
        }
        [Segment::Key(root), ..] if root == "steps" => {
            Err(TemplateError::NotOutput { path: text() })
        }
        _ => Err(TemplateError::UnknownRoot { path: text() }),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn refused(text: &str) -> TemplateError {
        Template::parse(text)
            .and_then(|t| t.check(&["fetch"], &["here", "later"]))
            .unwrap_err()
    }

    #[test]
    fn paths_are_read_at_their_roots() {
        let input = json!({"city": "Oslo", "days": [1, 2], "n": 3});
        let fetched = json!({"content": [{"text": "sunny"}], "ok": true});
        let cx = Context::new(&input, "r1", "wf").step("fetch", &fetched);
        let render = |text: &str| Template::parse(text).unwrap().render(&cx);
        assert_eq!(render("{{input.days}}"), Ok(json!([1, 2])));
        assert_eq!(render("{{ input.days[1] }}"), Ok(json!(2)));
        assert_eq!(render("{{input}}"), Ok(input.clone()));
        assert_eq!(render("{{steps.fetch.output.ok}}"), Ok(json!(true)));
        assert_eq!(render("{{run.id}}/{{run.workflow}}"), Ok(json!("r1/wf")));
        assert_eq!(
            render("{{input.city}} has {{input.n}} and {{input.days}}"),
            Ok(json!("Oslo has 3 and [1,2]"))
        );
        assert_eq!(render("plain"), Ok(json!("plain")));
        assert_eq!(render(""), Ok(json!("")));
        assert_eq!(
            render("{{input.days[2]}}"),
            Err(RenderError::Missing {
                path: "input.days[2]".into()
            })
        );
        assert_eq!(
            render("{{steps.other.output}}"),
            Err(RenderError::Missing {
                path: "steps.other.output".into()
            })
        );
    }

    #[test]
    fn paths_name_earlier_steps_only() {
        assert!(
            Template::parse("{{steps.fetch.output.content[0].text}}")
                .unwrap()
                .check(&["fetch"], &["here"])
                .is_ok()
        );
        assert!(matches!(
            refused("{{steps.later.output}}"),
            TemplateError::LaterStep { step, .. } if step == "later"
        ));
        assert!(matches!(
            refused("{{steps.here.output}}"),
            TemplateError::LaterStep { .. }
        ));
        assert!(matches!(
            refused("{{steps.nope.output}}"),
            TemplateError::UnknownStep { .. }
        ));
        assert!(matches!(
            refused("{{steps.fetch.result}}"),
            TemplateError::NotOutput { .. }
        ));
        assert!(matches!(
            refused("{{steps}}"),
            TemplateError::NotOutput { .. }
        ));
        assert!(matches!(
            refused("{{env.HOME}}"),
            TemplateError::UnknownRoot { .. }
        ));
        assert!(matches!(
            refused("{{run.secret}}"),
            TemplateError::RunField { .. }
        ));
        assert!(matches!(refused("{{run}}"), TemplateError::RunField { .. }));
    }

    #[test]
    fn syntax_is_paths_and_nothing_else() {
        assert_eq!(refused("{{input.city"), TemplateError::Unclosed);
        assert_eq!(refused("input.city}}"), TemplateError::Unclosed);
        assert_eq!(refused("}} {{input}}"), TemplateError::Unclosed);
        assert_eq!(refused("{{  }}"), TemplateError::Empty);
        for (bad, at, expected) in [
            ("{{input..city}}", 6, "a name"),
            ("{{input[x]}}", 6, "an index"),
            ("{{input[1}}", 7, "]"),
            ("{{input | upper}}", 5, ". or ["),
            ("{{ 1 + 1 }}", 2, ". or ["),
            ("{{.input}}", 0, "a name"),
        ] {
            match refused(bad) {
                TemplateError::Syntax {
                    at: got,
                    expected: e,
                    ..
                } => assert_eq!((got, e), (at, expected), "{bad}"),
                other => panic!("{bad}: {other:?}"),
            }
        }
    }

    #[test]
    fn expressions_and_paths_are_bounded() {
        // At the bound: 256 bytes of expression, 32 segments.
        let at = format!("input.{}", "k".repeat(EXPRESSION_MAX - 6));
        assert_eq!(at.len(), EXPRESSION_MAX);
        assert!(Template::parse(&format!("{{{{{at}}}}}")).is_ok());
        let past = format!("{at}k");
        assert_eq!(
            refused(&format!("{{{{{past}}}}}")),
            TemplateError::TooLong {
                len: EXPRESSION_MAX + 1
            }
        );
        let deep = |n: usize| format!("{{{{input{}}}}}", "[0]".repeat(n - 1));
        assert!(Template::parse(&deep(SEGMENTS_MAX)).is_ok());
        assert_eq!(
            refused(&deep(SEGMENTS_MAX + 1)),
            TemplateError::TooDeep {
                segments: SEGMENTS_MAX + 1
            }
        );
    }

    #[test]
    fn values_are_checked_and_rendered_member_by_member() {
        let args = json!({"q": "{{input.city}}", "list": ["x", {"a/b": "{{steps.nope.output}}"}]});
        let (pointer, e) = check_value(&args, "/arguments", &["fetch"], &["here"]).unwrap_err();
        assert_eq!(pointer, "/arguments/list/1/a~1b");
        assert!(matches!(e, TemplateError::UnknownStep { .. }));
        let input = json!({"city": "Oslo"});
        let cx = Context::new(&input, "r", "w");
        let args = json!({"q": "{{input.city}}", "n": 1, "l": ["{{input}}"]});
        assert_eq!(
            render_value(&args, "", &cx),
            Ok(json!({"q": "Oslo", "n": 1, "l": [{"city": "Oslo"}]}))
        );
        let missing = render_value(&json!({"x": ["{{input.nope}}"]}), "/arguments", &cx);
        assert_eq!(missing.unwrap_err().0, "/arguments/x/0");
    }
}
