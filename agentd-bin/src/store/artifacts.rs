//! The artifacts: named contents of a unit, each with its media type. Creating a name the
//! unit has replaces it.

use rusqlite::{OptionalExtension, params};

use super::db::{Db, check_size, from_sql};
use super::error::Error;
use super::handle::Store;
use crate::clock;

// The tools' bounds, kept here too: the store takes nothing past them.
pub(crate) use agentd_tools::artifact::{CONTENT_MAX, NAME_MAX};

/// An artifact as `artifact.create` and `artifact.list` tell it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Described {
    /// Its name.
    pub(crate) name: String,
    /// Its media type.
    pub(crate) media_type: String,
    /// Its content's size.
    pub(crate) bytes: u64,
}

/// An artifact, with its content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Artifact {
    /// Its name.
    pub(crate) name: String,
    /// Its media type.
    pub(crate) media_type: String,
    /// Its content.
    pub(crate) content: Vec<u8>,
}

/// `Invalid` unless `name` is 1..=128 bytes without `/` or control characters.
fn check_name(name: &str) -> Result<(), Error> {
    super::db::check_len("/name", name, 1, NAME_MAX)?;
    if name.chars().any(|c| c == '/' || c.is_control()) {
        return Err(Error::invalid(
            "/name",
            "no `/` and no control characters in a name",
        ));
    }
    Ok(())
}

const NOT_FOUND: Error = Error::NotFound { what: "artifact" };

impl Db {
    fn artifact_create(
        &mut self,
        unit: &str,
        name: &str,
        media_type: &str,
        content: &[u8],
    ) -> Result<Described, Error> {
        check_name(name)?;
        check_size("content", content.len(), CONTENT_MAX)?;
        self.sql
            .prepare_cached(
                "INSERT INTO artifacts (unit, name, media_type, bytes, created)
                 VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (unit, name) DO UPDATE
                 SET media_type = ?3, bytes = ?4, created = ?5",
            )?
            .execute(params![unit, name, media_type, content, clock::wall_ms()])?;
        Ok(Described {
            name: name.to_owned(),
            media_type: media_type.to_owned(),
            bytes: content.len() as u64,
        })
    }

    fn artifact_get(&mut self, unit: &str, name: &str) -> Result<Artifact, Error> {
        check_name(name)?;
        self.sql
            .prepare_cached(
                "SELECT media_type, bytes FROM artifacts WHERE unit = ?1 AND name = ?2",
            )?
            .query_row(params![unit, name], |r| {
                Ok(Artifact {
                    name: name.to_owned(),
                    media_type: r.get(0)?,
                    content: r.get(1)?,
                })
            })
            .optional()?
            .ok_or(NOT_FOUND)
    }

    fn artifact_delete(&mut self, unit: &str, name: &str) -> Result<bool, Error> {
        check_name(name)?;
        let deleted = self
            .sql
            .prepare_cached("DELETE FROM artifacts WHERE unit = ?1 AND name = ?2")?
            .execute(params![unit, name])?;
        Ok(deleted > 0)
    }

    /// The names of `unit`'s artifacts, in byte order.
    pub(super) fn artifact_names(&mut self, unit: &str) -> Result<Vec<String>, Error> {
        let listed = self.artifact_list(unit)?;
        Ok(listed.into_iter().map(|a| a.name).collect())
    }

    /// `unit`'s artifacts, by name.
    fn artifact_list(&mut self, unit: &str) -> Result<Vec<Described>, Error> {
        let mut query = self.sql.prepare_cached(
            "SELECT name, media_type, length(bytes) FROM artifacts WHERE unit = ?1 ORDER BY name",
        )?;
        let listed = query.query_map(params![unit], |r| {
            Ok(Described {
                name: r.get(0)?,
                media_type: r.get(1)?,
                bytes: from_sql(r.get(2)?),
            })
        })?;
        Ok(listed.collect::<Result<_, _>>()?)
    }
}

impl Store {
    /// `artifact.create`: keeps `content` (at most 8 MiB) as `unit`'s artifact `name` (1..=128
    /// bytes, no `/` or control characters), replacing one of that name.
    pub(crate) fn artifact_create(
        &self,
        unit: &str,
        name: &str,
        media_type: &str,
        content: Vec<u8>,
    ) -> impl Future<Output = Result<Described, Error>> + Send + use<> {
        let (unit, name, media_type) = (unit.to_owned(), name.to_owned(), media_type.to_owned());
        self.run(move |db| db.artifact_create(&unit, &name, &media_type, &content))
    }

    /// `artifact.get`: `unit`'s artifact `name`, or [`Error::NotFound`].
    pub(crate) fn artifact_get(
        &self,
        unit: &str,
        name: &str,
    ) -> impl Future<Output = Result<Artifact, Error>> + Send + use<> {
        let (unit, name) = (unit.to_owned(), name.to_owned());
        self.run(move |db| db.artifact_get(&unit, &name))
    }

    /// `artifact.delete`: deletes `unit`'s artifact `name`; whether it was there.
    pub(crate) fn artifact_delete(
        &self,
        unit: &str,
        name: &str,
    ) -> impl Future<Output = Result<bool, Error>> + Send + use<> {
        let (unit, name) = (unit.to_owned(), name.to_owned());
        self.run(move |db| db.artifact_delete(&unit, &name))
    }

    /// `artifact.list`: `unit`'s artifacts, by name.
    pub(crate) fn artifact_list(
        &self,
        unit: &str,
    ) -> impl Future<Output = Result<Vec<Described>, Error>> + Send + use<> {
        let unit = unit.to_owned();
        self.run(move |db| db.artifact_list(&unit))
    }
}

#[cfg(test)]
mod tests {
    use super::super::scratch;
    use super::*;

    #[tokio::test]
    async fn create_get_list_delete() {
        let (_dir, store) = scratch().await;
        let made = store
            .artifact_create("run:r", "b.json", "application/json", b"{}".to_vec())
            .await
            .unwrap();
        assert_eq!(
            made,
            Described {
                name: "b.json".into(),
                media_type: "application/json".into(),
                bytes: 2
            }
        );
        store
            .artifact_create("run:r", "a.bin", "application/octet-stream", vec![0, 255])
            .await
            .unwrap();
        // Another unit's artifacts are its own.
        store
            .artifact_create("subagent:s", "a.bin", "text/plain", b"x".to_vec())
            .await
            .unwrap();
        let listed = store.artifact_list("run:r").await.unwrap();
        let names: Vec<_> = listed.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["a.bin", "b.json"]);
        let got = store.artifact_get("run:r", "a.bin").await.unwrap();
        assert_eq!(
            (got.media_type.as_str(), got.content),
            ("application/octet-stream", vec![0, 255])
        );

        // Creating a name again replaces it.
        store
            .artifact_create("run:r", "a.bin", "text/plain", b"abc".to_vec())
            .await
            .unwrap();
        let got = store.artifact_get("run:r", "a.bin").await.unwrap();
        assert_eq!(
            (got.media_type.as_str(), got.content),
            ("text/plain", b"abc".to_vec())
        );
        assert_eq!(store.artifact_list("run:r").await.unwrap().len(), 2);

        assert!(store.artifact_delete("run:r", "a.bin").await.unwrap());
        assert!(!store.artifact_delete("run:r", "a.bin").await.unwrap());
        let e = store.artifact_get("run:r", "a.bin").await.unwrap_err();
        assert!(matches!(e, Error::NotFound { what: "artifact" }), "{e:?}");
        assert_eq!(e.code(), "not_found");
        assert_eq!(store.artifact_list("subagent:s").await.unwrap().len(), 1);
        assert!(store.artifact_list("operator").await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn names_and_contents_are_bounded() {
        let (_dir, store) = scratch().await;
        let at = "n".repeat(NAME_MAX);
        store
            .artifact_create("u", &at, "text/plain", Vec::new())
            .await
            .unwrap();
        let past = "n".repeat(NAME_MAX + 1);
        for bad in [past.as_str(), "", "a/b", "a\tb"] {
            let e = store
                .artifact_create("u", bad, "text/plain", Vec::new())
                .await
                .unwrap_err();
            assert!(
                matches!(&e, Error::Invalid { pointer, .. } if pointer == "/name"),
                "{e:?}"
            );
            assert_eq!(e.code(), "invalid_arguments");
        }
        let made = store
            .artifact_create("u", "big", "application/octet-stream", vec![7; CONTENT_MAX])
            .await
            .unwrap();
        assert_eq!(made.bytes, CONTENT_MAX as u64);
        let e = store
            .artifact_create("u", "big", "text/plain", vec![7; CONTENT_MAX + 1])
            .await
            .unwrap_err();
        assert!(
            matches!(
                e,
                Error::TooLarge {
                    what: "content",
                    ..
                }
            ),
            "{e:?}"
        );
        // The one kept is unchanged.
        let got = store.artifact_get("u", "big").await.unwrap();
        assert_eq!(
            (got.media_type.as_str(), got.content.len()),
            ("application/octet-stream", CONTENT_MAX)
        );
    }
}
