//! The contracts' implementations (`[knowledge]`, `[search]`, `[contracts.map."TOOL"]`):
//! which server's tool does each contract tool's work.
//!
//! ```toml
//! [knowledge]
//! server = "kb"            # kb's tools knowledge.search, knowledge.get, knowledge.list
//! [search]
//! server = "web"           # web's tools search.query, search.fetch
//! [contracts.map."code.run"]
//! server = "sandbox"       # any server's tool, under any name
//! tool = "run_code"
//! [contracts.map."knowledge.get"]
//! server = "wiki"          # a mapping wins over the family's server
//! tool = "page"
//! ```
//!
//! A family's server implements each of the family's tools by the contract's name; a mapping
//! implements one tool by a server's tool of any name. `code.run` and `exec` have no family:
//! only a mapping implements them (and `exec` also the local runner, when it is built and
//! enabled). A contract tool with no implementation is not offered, and says why.

use std::collections::BTreeMap;

use agentd_tools::contract;
use toml::Spanned;

use super::file::{FamilyFile, MappingFile};
use super::{At, ConfigError};

/// A server's tool implementing a contract tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mapping {
    /// The server, one of `mcp.servers`.
    pub(crate) server: String,
    /// Its tool.
    pub(crate) tool: String,
}

/// How a contract tool is implemented.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Implementation<'a> {
    /// By a server's tool, called through the supervisor's registry.
    Mapped(&'a Mapping),
    /// By the local command runner (`exec` only).
    Local,
}

/// Every contract tool's implementation, as configured.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Contracts {
    /// The mapped tools, by contract tool.
    mapped: BTreeMap<&'static str, Mapping>,
    /// Whether the local command runner implements `exec`: when it is built and enabled
    /// (`security.exec.enabled`; false by default), and so no mapping of `exec` is.
    pub(super) local_exec: bool,
}

impl Contracts {
    /// How contract tool `tool` is implemented, or why it is not (and so not offered).
    pub(crate) fn implementation(&self, tool: &str) -> Result<Implementation<'_>, String> {
        if let Some(mapping) = self.mapped.get(tool) {
            return Ok(Implementation::Mapped(mapping));
        }
        let map = format!("no [contracts.map.\"{tool}\"] mapping");
        match (tool, contract::family(tool)) {
            ("exec", _) if self.local_exec => Ok(Implementation::Local),
            ("exec", _) => Err(format!("{map}, and {}", agentd_tools::exec::NOT_OFFERED)),
            (_, Some(family)) => Err(format!("no {family}.server and {map}")),
            _ => Err(format!("only a mapping implements it, and there is {map}")),
        }
    }

    /// The contract tools the tool `tool` of `server` implements.
    pub(crate) fn implemented_by<'a>(
        &'a self,
        server: &'a str,
        tool: &'a str,
    ) -> impl Iterator<Item = &'static str> + 'a {
        let of = move |m: &Mapping| m.server == server && m.tool == tool;
        self.mapped
            .iter()
            .filter(move |(_, m)| of(m))
            .map(|(c, _)| *c)
    }
}

/// Checks `[knowledge]`, `[search]` and `[contracts.map]` against the configured `servers`,
/// the local command runner implementing `exec` when `local_exec`: a mapping of `exec` too
/// is refused.
pub(super) fn contracts(
    families: [(&str, Option<&FamilyFile>); 2],
    map: &BTreeMap<Spanned<String>, MappingFile>,
    servers: &dyn Fn(&str) -> bool,
    local_exec: bool,
    at: &At<'_>,
) -> Result<Contracts, ConfigError> {
    let server = |name: &Spanned<String>, key: &str| match servers(name.get_ref()) {
        true => Ok(name.get_ref().clone()),
        false => Err(at(
            Some(name.span()),
            key,
            format!("{:?} is not one of mcp.servers", name.get_ref()),
        )),
    };
    let mut mapped = BTreeMap::new();
    for (family, file) in families {
        let Some(file) = file else { continue };
        let server = server(&file.server, &format!("{family}.server"))?;
        for tool in contract::TOOLS {
            if contract::family(tool) == Some(family) {
                let tool_name = tool.to_owned();
                let server = server.clone();
                mapped.insert(
                    tool,
                    Mapping {
                        server,
                        tool: tool_name,
                    },
                );
            }
        }
    }
    for (name, file) in map {
        let key = format!("contracts.map.\"{}\"", name.get_ref());
        let Some(tool) = contract::TOOLS.into_iter().find(|t| t == name.get_ref()) else {
            return Err(at(
                Some(name.span()),
                &key,
                format!(
                    "{:?} is no contract tool: one of {}",
                    name.get_ref(),
                    contract::TOOLS.join(", ")
                ),
            ));
        };
        if tool == "exec" && local_exec {
            return Err(at(
                Some(name.span()),
                &key,
                "maps exec while security.exec.enabled = true runs it locally: keep one".to_owned(),
            ));
        }
        let server = server(&file.server, &format!("{key}.server"))?;
        if file.tool.get_ref().is_empty() {
            return Err(at(
                Some(file.tool.span()),
                &format!("{key}.tool"),
                "names no tool".to_owned(),
            ));
        }
        let tool_name = file.tool.get_ref().clone();
        mapped.insert(
            tool,
            Mapping {
                server,
                tool: tool_name,
            },
        );
    }
    Ok(Contracts { mapped, local_exec })
}
