//! Settings by name (docs/configuration.md): any setting of a
//! [`Config`] through `genie_config_set_int`/`_string`, and a server's own
//! settings on a [`ServerConfig`] for [`Server::with_settings`].

use std::ptr::{self, NonNull};

use crate::error::check;
use crate::{cstring, ffi, opt_cstring, opt_ptr, Config, Result, Server};

/// The value of a setting named at run time: an integer or boolean, or text
/// (`None`: the setting's default). Made from `i64`, `i32`, `u32`, `bool`,
/// `&str` and `Option<&str>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SettingValue<'a> {
    Int(i64),
    Text(Option<&'a str>),
}

impl From<i64> for SettingValue<'_> {
    fn from(v: i64) -> Self {
        SettingValue::Int(v)
    }
}
impl From<i32> for SettingValue<'_> {
    fn from(v: i32) -> Self {
        SettingValue::Int(i64::from(v))
    }
}
impl From<u32> for SettingValue<'_> {
    fn from(v: u32) -> Self {
        SettingValue::Int(i64::from(v))
    }
}
impl From<bool> for SettingValue<'_> {
    fn from(v: bool) -> Self {
        SettingValue::Int(i64::from(v))
    }
}
impl<'a> From<&'a str> for SettingValue<'a> {
    fn from(v: &'a str) -> Self {
        SettingValue::Text(Some(v))
    }
}
impl<'a> From<Option<&'a str>> for SettingValue<'a> {
    fn from(v: Option<&'a str>) -> Self {
        SettingValue::Text(v)
    }
}

impl Config {
    /// Sets the setting `name` of docs/configuration.md that clients read
    /// (e.g. `"max_message_bytes"`, `"graph_deltas"`, `"cluster"`).
    /// Errors: `InvalidArgument` for an unknown name, a server's own setting
    /// (those go on a [`ServerConfig`]), or a value out of its bounds; the
    /// detail names the setting.
    pub fn set<'a>(&mut self, name: &str, value: impl Into<SettingValue<'a>>) -> Result<&mut Self> {
        let n = cstring("setting name", name)?;
        match value.into() {
            // SAFETY: live config; the strings are copied by the call.
            SettingValue::Int(v) => check(unsafe { ffi::genie_config_set_int(self.raw.as_ptr(), n.as_ptr(), v) })?,
            SettingValue::Text(t) => {
                let t = opt_cstring("setting value", t)?;
                // SAFETY: as above.
                check(unsafe { ffi::genie_config_set_string(self.raw.as_ptr(), n.as_ptr(), opt_ptr(&t)) })?
            }
        };
        Ok(self)
    }
}

/// A server's own settings (side "server" in docs/configuration.md:
/// session limits, quotas, the memory budget, the stage timeout, the
/// transports it serves...), for [`Server::with_settings`]; a
/// `genie_server_config_t`.
#[derive(Debug)]
pub struct ServerConfig {
    raw: NonNull<ffi::genie_server_config_t>,
}

// SAFETY: plain data owned by this value; setters take &mut.
unsafe impl Send for ServerConfig {}

impl ServerConfig {
    /// Every server setting at its default.
    pub fn new() -> Result<ServerConfig> {
        let mut raw = ptr::null_mut();
        // SAFETY: valid out-pointer.
        check(unsafe { ffi::genie_server_config_create(&mut raw) })?;
        Ok(ServerConfig { raw: NonNull::new(raw).expect("genie_server_config_create gave NULL") })
    }

    /// Sets the server setting `name` (e.g. `"max_sessions"`,
    /// `"serve_transports"`). Errors: `InvalidArgument` for an unknown name,
    /// a setting clients read too (those go on a [`Config`]), or a value out
    /// of its bounds.
    pub fn set<'a>(&mut self, name: &str, value: impl Into<SettingValue<'a>>) -> Result<&mut Self> {
        let n = cstring("setting name", name)?;
        match value.into() {
            // SAFETY: live server config; the strings are copied.
            SettingValue::Int(v) => {
                check(unsafe { ffi::genie_server_config_set_int(self.raw.as_ptr(), n.as_ptr(), v) })?
            }
            SettingValue::Text(t) => {
                let t = opt_cstring("setting value", t)?;
                // SAFETY: as above.
                check(unsafe { ffi::genie_server_config_set_string(self.raw.as_ptr(), n.as_ptr(), opt_ptr(&t)) })?
            }
        };
        Ok(self)
    }
}

impl Drop for ServerConfig {
    fn drop(&mut self) {
        // SAFETY: owned, destroyed once.
        unsafe { ffi::genie_server_config_destroy(self.raw.as_ptr()) }
    }
}

impl Server {
    /// As [`Server::new`], with the server's own settings from `server`
    /// (None: their defaults) and the shared ones from `config`
    /// (`genie_server_create_with`).
    pub fn with_settings(
        config: Option<&Config>,
        server: Option<&ServerConfig>,
        host: Option<&str>,
        port: u16,
    ) -> Result<Server> {
        let h = opt_cstring("host", host)?;
        let cfg = config.map_or(ptr::null(), |c| c.raw.as_ptr() as *const _);
        let scfg = server.map_or(ptr::null(), |s| s.raw.as_ptr() as *const _);
        let mut raw = ptr::null_mut();
        // SAFETY: configs NULL or live; the host string is copied.
        check(unsafe { ffi::genie_server_create_with(cfg, scfg, opt_ptr(&h), i32::from(port), &mut raw) })?;
        Ok(Server { raw: NonNull::new(raw).expect("genie_server_create_with gave NULL") })
    }
}
