//! JSON text appended to a caller's buffer: one value, and writes that land whole or not at
//! all.

use serde::Serialize;

use crate::Error;

/// Appends `value` as JSON.
pub(crate) fn value<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) -> Result<(), Error> {
    serde_json::to_writer(out, value).map_err(|e| Error::encoding(&e))
}

/// Runs `write`, leaving `out` as it was if it fails.
pub(crate) fn whole(
    out: &mut Vec<u8>,
    write: impl FnOnce(&mut Vec<u8>) -> Result<(), Error>,
) -> Result<(), Error> {
    let len = out.len();
    let written = write(out);
    if written.is_err() {
        out.truncate(len);
    }
    written
}
