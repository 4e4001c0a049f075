//! `skills.list`, `skills.load` and `skills.unload`: the prompts of the `skills.sources`
//! servers are the skills, and each unit of work ([`Caller::unit`](crate::Caller::unit))
//! has a set of them loaded into its context.
//!
//! A skill is named `<server>/<prompt>` ([`Skill::name_of`]), so that two sources' prompts
//! of the same name are two skills, and a skill keeps its name whatever other sources offer.
//! Loading one gets its prompt with the arguments given (each a string; the required ones
//! checked first, [`Skill::check`]) and adds its messages to the unit's set, replacing
//! those of the same skill loaded before; a set holds at most [`LOADED_MAX`] skills and
//! [`LOADED_BYTES_MAX`] bytes of text ([`LoadedSet`]).

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::Error;
use crate::schema::{Empty, parse};

/// The most skills a unit has loaded at once.
pub const LOADED_MAX: usize = 8;
/// The most bytes of text a unit's loaded skills hold together.
pub const LOADED_BYTES_MAX: usize = 64 * 1024;

/// An argument of a skill (its prompt's).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Argument {
    /// Its name.
    pub name: String,
    /// What it is for.
    pub description: Option<String>,
    /// Whether it must be given.
    pub required: bool,
}

impl Argument {
    /// Argument `name`, required or not.
    pub fn new(name: &str, description: Option<&str>, required: bool) -> Self {
        Self {
            name: name.to_owned(),
            description: description.map(str::to_owned),
            required,
        }
    }
}

/// A skill: a prompt of a source server.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Skill {
    /// Its name, `<server>/<prompt>`.
    pub name: String,
    /// The server offering it.
    pub server: String,
    /// The prompt's name on that server.
    pub prompt: String,
    /// What it is for.
    pub description: Option<String>,
    /// Its arguments.
    pub arguments: Vec<Argument>,
}

impl Skill {
    /// Prompt `prompt` of `server`, described by `description`, taking `arguments`.
    pub fn new(
        server: &str,
        prompt: &str,
        description: Option<&str>,
        arguments: Vec<Argument>,
    ) -> Self {
        Self {
            name: Self::name_of(server, prompt),
            server: server.to_owned(),
            prompt: prompt.to_owned(),
            description: description.map(str::to_owned),
            arguments,
        }
    }

    /// The name of prompt `prompt` of `server` as a skill: `<server>/<prompt>`.
    pub fn name_of(server: &str, prompt: &str) -> String {
        format!("{server}/{prompt}")
    }

    /// Checks `arguments` against the skill's: every required one given, none it does not
    /// take (`invalid_arguments` at `/arguments/<name>`).
    pub fn check(&self, arguments: &BTreeMap<String, String>) -> Result<(), Error> {
        let tool = "skills.load";
        if let Some(missing) = self
            .arguments
            .iter()
            .find(|a| a.required && !arguments.contains_key(&a.name))
        {
            let pointer = format!("/arguments/{}", missing.name);
            let message = format!("{} takes {:?}, required", self.name, missing.name);
            return Err(Error::invalid(tool, &pointer, "required", message));
        }
        if let Some(unknown) = arguments
            .keys()
            .find(|k| !self.arguments.iter().any(|a| a.name == **k))
        {
            let pointer = format!("/arguments/{unknown}");
            let message = format!("{} takes no argument {unknown:?}", self.name);
            return Err(Error::invalid(tool, &pointer, "unknown", message));
        }
        Ok(())
    }

    fn to_value(&self) -> Value {
        let arguments: Vec<Value> = self
            .arguments
            .iter()
            .map(|a| json!({"name": a.name, "description": a.description, "required": a.required}))
            .collect();
        json!({
            "name": self.name,
            "server": self.server,
            "prompt": self.prompt,
            "description": self.description,
            "arguments": arguments,
        })
    }
}

/// Who says a message of a skill.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Role {
    /// The person.
    User,
    /// The model.
    Assistant,
}

/// One message of a loaded skill, as text.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Said {
    /// Who says it.
    pub role: Role,
    /// What is said.
    pub text: String,
}

impl Said {
    /// `text`, said by `role`.
    pub fn new(role: Role, text: &str) -> Self {
        Self {
            role,
            text: text.to_owned(),
        }
    }
}

/// A skill loaded into a unit's context: its prompt's messages, got with the arguments
/// given.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Loaded {
    /// The skill's name.
    pub name: String,
    /// The server offering it.
    pub server: String,
    /// Its messages, in order.
    pub messages: Vec<Said>,
}

impl Loaded {
    /// `skill`, loaded as `messages`.
    pub fn new(skill: &Skill, messages: Vec<Said>) -> Self {
        Self {
            name: skill.name.clone(),
            server: skill.server.clone(),
            messages,
        }
    }

    /// The bytes of its text.
    pub fn bytes(&self) -> usize {
        self.messages.iter().map(|m| m.text.len()).sum()
    }
}

/// The skills a unit has loaded, in the order they were first loaded: at most
/// [`LOADED_MAX`] of them, at most [`LOADED_BYTES_MAX`] bytes of text together.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadedSet {
    skills: Vec<Loaded>,
}

impl LoadedSet {
    /// Adds `loaded`, in place of the same skill's messages if it is loaded already;
    /// [`Error::TooLarge`] when the set would pass a bound, and then nothing changes.
    pub fn load(&mut self, loaded: Loaded) -> Result<(), Error> {
        let at = self.skills.iter().position(|s| s.name == loaded.name);
        let others = self
            .skills
            .iter()
            .enumerate()
            .filter(|(i, _)| Some(*i) != at);
        let (count, bytes) =
            others.fold((1, loaded.bytes()), |(n, b), (_, s)| (n + 1, b + s.bytes()));
        if count > LOADED_MAX {
            return Err(Error::TooLarge {
                what: "loaded skills",
                size: count,
                max: LOADED_MAX,
            });
        }
        if bytes > LOADED_BYTES_MAX {
            return Err(Error::TooLarge {
                what: "loaded skills' text",
                size: bytes,
                max: LOADED_BYTES_MAX,
            });
        }
        match at {
            Some(i) => self.skills[i] = loaded,
            None => self.skills.push(loaded),
        }
        Ok(())
    }

    /// Removes skill `name`; whether it was loaded.
    pub fn unload(&mut self, name: &str) -> bool {
        let before = self.skills.len();
        self.skills.retain(|s| s.name != name);
        self.skills.len() != before
    }

    /// The skills loaded, in order.
    pub fn skills(&self) -> &[Loaded] {
        &self.skills
    }

    /// Their names, in order.
    pub fn names(&self) -> Vec<String> {
        self.skills.iter().map(|s| s.name.clone()).collect()
    }

    /// Whether none is loaded.
    pub fn is_empty(&self) -> bool {
        self.skills.is_empty()
    }
}

/// The skills catalogue and the loaded sets, as the daemon keeps them.
pub trait Skills: Send + Sync {
    /// Every skill of the sources connected now, in the order of `skills.sources`, then of
    /// each server's listing.
    fn list(&self) -> impl Future<Output = Result<Vec<Skill>, Error>> + Send;

    /// The names of the skills `unit` has loaded, in order.
    fn loaded(&self, unit: &str) -> impl Future<Output = Result<Vec<String>, Error>> + Send;

    /// Gets skill `name`'s prompt with `arguments` and adds it to `unit`'s set (in place of
    /// the skill's earlier load): what was loaded. [`Error::NotFound`] for a skill not in the
    /// catalogue, `invalid_arguments` for arguments it does not take ([`Skill::check`]),
    /// [`Error::NotConnected`] or [`Error::Server`] when its prompt could not be got,
    /// [`Error::TooLarge`] past a bound of the set ([`LoadedSet::load`]).
    fn load(
        &self,
        unit: &str,
        name: &str,
        arguments: BTreeMap<String, String>,
    ) -> impl Future<Output = Result<Loaded, Error>> + Send;

    /// Removes skill `name` from `unit`'s set; whether it was loaded.
    fn unload(&self, unit: &str, name: &str) -> impl Future<Output = Result<bool, Error>> + Send;
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LoadArgs {
    name: String,
    #[serde(default)]
    arguments: BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UnloadArgs {
    name: String,
}

/// Runs `skills.list`, `skills.load` or `skills.unload` for `unit`.
pub(crate) async fn call(
    skills: &impl Skills,
    unit: &str,
    name: &str,
    arguments: Value,
) -> Result<Value, Error> {
    match name {
        "skills.list" => {
            let Empty {} = parse(name, arguments)?;
            let listed: Vec<Value> = skills.list().await?.iter().map(Skill::to_value).collect();
            Ok(json!({"skills": listed, "loaded": skills.loaded(unit).await?}))
        }
        "skills.load" => {
            let args: LoadArgs = parse(name, arguments)?;
            let loaded = skills.load(unit, &args.name, args.arguments).await?;
            Ok(json!({
                "name": loaded.name,
                "server": loaded.server,
                "messages": loaded.messages.len(),
                "bytes": loaded.bytes(),
                "loaded": skills.loaded(unit).await?,
            }))
        }
        _ => {
            let args: UnloadArgs = parse(name, arguments)?;
            let unloaded = skills.unload(unit, &args.name).await?;
            Ok(json!({"unloaded": unloaded, "loaded": skills.loaded(unit).await?}))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skill(name: &str) -> Skill {
        Skill::new("s", name, None, vec![Argument::new("who", None, true)])
    }

    fn loaded(name: &str, bytes: usize) -> Loaded {
        let said = Said::new(Role::User, &"x".repeat(bytes));
        Loaded::new(&skill(name), vec![said])
    }

    #[test]
    fn a_set_holds_its_bounds_at_the_bound_and_refuses_one_past() {
        let mut set = LoadedSet::default();
        for i in 0..LOADED_MAX {
            set.load(loaded(&format!("p{i}"), 1)).unwrap();
        }
        let past = set.load(loaded("p-past", 1)).unwrap_err();
        assert!(
            matches!(
                past,
                Error::TooLarge {
                    size: 9,
                    max: LOADED_MAX,
                    ..
                }
            ),
            "{past:?}"
        );
        assert_eq!(set.skills().len(), LOADED_MAX);
        // The same skill again replaces its load: no more skills.
        set.load(loaded("p0", 2)).unwrap();
        assert_eq!(set.skills()[0].bytes(), 2);
        assert_eq!(set.names()[0], "s/p0");

        let mut set = LoadedSet::default();
        set.load(loaded("a", LOADED_BYTES_MAX - 10)).unwrap();
        set.load(loaded("b", 10)).unwrap();
        let past = set.load(loaded("c", 1)).unwrap_err();
        assert!(
            matches!(past, Error::TooLarge { size, max: LOADED_BYTES_MAX, .. } if size == LOADED_BYTES_MAX + 1),
            "{past:?}"
        );
        // Replacing a load counts it once: b grows by what it had.
        set.load(loaded("b", 10)).unwrap();
        assert!(set.load(loaded("b", 11)).is_err());
        assert_eq!(set.names(), ["s/a", "s/b"]);
        assert!(set.unload("s/a"));
        assert!(!set.unload("s/a"));
        set.load(loaded("c", 1)).unwrap();
        assert_eq!(set.names(), ["s/b", "s/c"]);
    }

    #[test]
    fn arguments_are_checked_against_the_skills() {
        let s = skill("greet");
        assert_eq!(s.name, "s/greet");
        let err = s.check(&BTreeMap::new()).unwrap_err();
        assert!(
            matches!(&err, Error::InvalidArguments { pointer, rule, .. } if pointer == "/arguments/who" && rule == "required"),
            "{err:?}"
        );
        let mut args = BTreeMap::from([("who".to_owned(), "Ada".to_owned())]);
        assert_eq!(s.check(&args), Ok(()));
        args.insert("what".into(), "x".into());
        let err = s.check(&args).unwrap_err();
        assert!(
            matches!(&err, Error::InvalidArguments { pointer, .. } if pointer == "/arguments/what"),
            "{err:?}"
        );
    }
}
