//! A real, private PostgreSQL server for tests: one per test process, started on first use by [`cluster()`],
//! with every test taking a database of its own from [`PgCluster::fresh_database`].
//!
//! This module owns that server whole: finding the binaries (`NMB_PG_BIN`, which `scripts/test.sh` sets from
//! `scripts/postgres.sh`, else the newest `/usr/lib/postgresql/*/bin`, else `PATH`), its temporary directory
//! (`$TMPDIR/nmb-pg-*`: data, socket folder, log), its superuser `nmb` and random password (scram-sha-256, over
//! TCP on a free loopback port only), and its teardown. As root it runs everything as `nobody` through
//! `setpriv` (util-linux), since PostgreSQL refuses to run as root.
//!
//! Teardown: the server is this process's child, spawned from a thread that lives as long as it does, with
//! `setpriv --pdeathsig KILL`: it is killed when the test process ends, however it ends. A small janitor
//! (`sh`, in its own process group, holding the read end of a pipe whose write end only this process has)
//! notices the same end as end-of-file, makes sure the server is gone and removes the temporary directory.
//! Directories older than a day that a janitor could not remove (a machine that stopped mid-test) are removed
//! the next time a server starts.
//!
//! The password never appears in messages or panics (they show `***`); [`PgCluster::password`] and
//! [`PgCluster::url`] give it to the code under test.

use std::fmt;
use std::fs;
use std::io::Write;
use std::net::TcpListener;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use crate::need;

/// The loopback address the server listens on (and the only way in: no socket is used by clients).
const HOST: &str = "127.0.0.1";
/// The superuser `initdb` creates.
const USER: &str = "nmb";
/// How long a started server has to accept connections.
const READY_WITHIN: Duration = Duration::from_secs(30);
/// Leftover `nmb-pg-*` directories older than this are removed when a server starts.
const STALE_AFTER: Duration = Duration::from_secs(24 * 60 * 60);

/// This process's private PostgreSQL server. See the [module docs](self).
pub struct PgCluster {
    bin: PathBuf,
    dir: PathBuf,
    port: u16,
    password: String,
    /// The CA that signed the server's TLS certificate (for `127.0.0.1`), when `openssl` was there to make one.
    ca: Option<PathBuf>,
    /// The janitor's stdin: held (never written to after startup, never closed) until the process ends.
    _janitor: Janitor,
}

impl fmt::Debug for PgCluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgCluster")
            .field("bin", &self.bin)
            .field("dir", &self.dir)
            .field("port", &self.port)
            .field("password", &"***")
            .finish_non_exhaustive()
    }
}

/// The shared server: started on the first call, then the same one for every test of this process.
///
/// `None` (after [`need()`]: a message locally, a panic under `CI=true`) when PostgreSQL's server binaries are
/// absent, or when running as root without `setpriv`. Panics, with the tail of the server's log, when they are
/// present but the server does not start: that is a real failure, and every later call panics the same way.
pub fn cluster() -> Option<&'static PgCluster> {
    static SETUP: OnceLock<Result<Setup, String>> = OnceLock::new();
    static STATE: OnceLock<Result<PgCluster, String>> = OnceLock::new();
    let found = SETUP.get_or_init(setup);
    let how = match found {
        Ok(_) => String::new(),
        Err(why) => format!(
            "{why}; scripts/postgres.sh installs Debian's postgresql and prints its bin folder, which \
             scripts/test.sh exports as NMB_PG_BIN"
        ),
    };
    let setup = need(
        "a PostgreSQL server (initdb and postgres)",
        &how,
        found.as_ref().ok(),
    )?;
    match STATE.get_or_init(|| start(setup)) {
        Ok(cluster) => Some(cluster),
        Err(why) => panic!("{why}"),
    }
}

impl PgCluster {
    /// `postgres://nmb:PASSWORD@127.0.0.1:PORT/DB`.
    pub fn url(&self, db: &str) -> String {
        format!(
            "postgres://{USER}:{}@{HOST}:{}/{db}",
            self.password, self.port
        )
    }

    /// The superuser `nmb`'s password (hex; random per process).
    pub fn password(&self) -> &str {
        &self.password
    }

    /// The loopback TCP port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The temporary directory holding the server's data (`data/`), socket folder and log (`server.log`);
    /// removed after this process ends.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Creates a new, empty database with a name no other call uses (`t_<pid>_<n>`) and returns its
    /// [`url`](Self::url), so that tests never share data. Panics when `createdb` fails.
    /// The PEM file of the CA behind the server's TLS certificate: TLS is on when this is `Some`.
    pub fn ca_cert(&self) -> Option<&Path> {
        self.ca.as_deref()
    }

    pub fn fresh_database(&self) -> String {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let name = format!(
            "t_{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let port = self.port.to_string();
        let out = self
            .client("createdb")
            .args(["-w", "-h", HOST, "-p", &port, "-U", USER, &name])
            .output();
        self.check("createdb", out);
        self.url(&name)
    }

    /// Runs `sql` with `psql -X -A -t -q -w -v ON_ERROR_STOP=1 -h 127.0.0.1 -p PORT -U nmb -d DB -c SQL` and
    /// returns its trimmed stdout: the last statement's rows, unaligned, `|` between columns, without headers
    /// or command tags. `db` is a database name or a URL from [`url`](Self::url) or
    /// [`fresh_database`](Self::fresh_database). Panics with psql's stderr when it fails.
    pub fn psql(&self, db: &str, sql: &str) -> String {
        let port = self.port.to_string();
        let out = self
            .client("psql")
            .args(["-X", "-A", "-t", "-q", "-w", "-v", "ON_ERROR_STOP=1"])
            .args(["-h", HOST, "-p", &port, "-U", USER, "-d", database_name(db)])
            .args(["-c", sql])
            .output();
        self.check("psql", out).trim().to_string()
    }

    /// A client program from the server's bin folder (else `PATH`), with the password in its environment and
    /// none of the `PG*` settings that could send it elsewhere.
    fn client(&self, program: &str) -> Command {
        let mut cmd = Command::new(tool(&self.bin, program));
        for var in [
            "PGSERVICE",
            "PGSERVICEFILE",
            "PGSSLMODE",
            "PGGSSENCMODE",
            "PGOPTIONS",
            "PGTARGETSESSIONATTRS",
        ] {
            cmd.env_remove(var);
        }
        cmd.env("PGPASSWORD", &self.password)
            .env("PGCONNECT_TIMEOUT", "10")
            .stdin(Stdio::null());
        cmd
    }

    /// `out`'s stdout, or a panic naming `what` with its (redacted) stderr.
    fn check(&self, what: &str, out: std::io::Result<Output>) -> String {
        let out = out.unwrap_or_else(|e| panic!("running {what}: {e}"));
        if !out.status.success() {
            panic!(
                "{what} failed ({}): {}",
                out.status,
                self.redact(&String::from_utf8_lossy(&out.stderr))
            );
        }
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn redact(&self, text: &str) -> String {
        redact(text, &self.password)
    }
}

/// `text` with every occurrence of `password` replaced by `***`.
fn redact(text: &str, password: &str) -> String {
    if password.is_empty() {
        text.to_string()
    } else {
        text.replace(password, "***")
    }
}

/// The database a `psql` argument names: itself, or a URL's path.
fn database_name(db: &str) -> &str {
    if db.starts_with("postgres://") || db.starts_with("postgresql://") {
        let path = db.rsplit_once('/').map_or(db, |(_, path)| path);
        path.split('?').next().unwrap_or(path)
    } else {
        db
    }
}

/// What starting a server needs, found without starting anything.
struct Setup {
    /// The folder with `initdb` and `postgres` (and, normally, the client tools).
    bin: PathBuf,
    /// `setpriv`, when it works.
    setpriv: bool,
    /// The unprivileged user and group to run the server as: `Some` when this process is root.
    run_as: Option<(u32, u32)>,
}

fn setup() -> Result<Setup, String> {
    let bin = find_bin()?;
    let setpriv = Command::new("setpriv")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let run_as = if running_as_root() {
        if !setpriv {
            return Err(
                "running as root needs setpriv (util-linux) to run the server as nobody".into(),
            );
        }
        Some((id_of("-u"), id_of("-g")))
    } else {
        None
    };
    Ok(Setup {
        bin,
        setpriv,
        run_as,
    })
}

fn is_server_bin(dir: &Path) -> bool {
    dir.join("initdb").is_file() && dir.join("postgres").is_file()
}

/// `NMB_PG_BIN`, else the newest `/usr/lib/postgresql/*/bin`, else where `PATH`'s `initdb` really is.
fn find_bin() -> Result<PathBuf, String> {
    if let Some(dir) = std::env::var_os("NMB_PG_BIN").filter(|v| !v.is_empty()) {
        let dir = PathBuf::from(dir);
        return if is_server_bin(&dir) {
            Ok(dir)
        } else {
            Err(format!(
                "NMB_PG_BIN={} has no initdb and postgres",
                dir.display()
            ))
        };
    }
    let version = |name: &str| -> Option<Vec<u32>> {
        name.split('.').map(|part| part.parse().ok()).collect()
    };
    let newest = fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| Some((version(e.file_name().to_str()?)?, e.path().join("bin"))))
        .filter(|(_, bin)| is_server_bin(bin))
        .max();
    if let Some((_, bin)) = newest {
        return Ok(bin);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        let Ok(initdb) = fs::canonicalize(dir.join("initdb")) else {
            continue;
        };
        match initdb.parent() {
            Some(real) if is_server_bin(real) => return Ok(real.to_path_buf()),
            _ if is_server_bin(&dir) => return Ok(dir),
            _ => {}
        }
    }
    Err("no initdb and postgres in NMB_PG_BIN, /usr/lib/postgresql/*/bin or PATH".into())
}

/// `program` from `bin`, else by name from `PATH`.
fn tool(bin: &Path, program: &str) -> PathBuf {
    let path = bin.join(program);
    if path.is_file() {
        path
    } else {
        PathBuf::from(program)
    }
}

/// Whether the effective user is root (from `/proc/self/status`, else `id -u`).
fn running_as_root() -> bool {
    let from_proc = fs::read_to_string("/proc/self/status").ok().and_then(|s| {
        let uids = s.lines().find_map(|l| l.strip_prefix("Uid:"))?;
        uids.split_whitespace().nth(1).map(|euid| euid == "0")
    });
    from_proc.unwrap_or_else(|| {
        Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
    })
}

/// `nobody`'s user (`-u`) or group (`-g`) id, else 65534.
fn id_of(which: &str) -> u32 {
    Command::new("id")
        .args([which, "nobody"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(65534)
}

/// 128 random bits, as hex (URL-safe as it is).
fn random_password() -> String {
    use std::hash::{BuildHasher, Hasher};
    use std::io::Read;
    let mut bytes = [0u8; 16];
    let from_os = fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if from_os.is_err() {
        for chunk in bytes.chunks_mut(8) {
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u128(now_nanos());
            chunk.copy_from_slice(&h.finish().to_le_bytes()[..chunk.len()]);
        }
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn now_nanos() -> u128 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// Removes `nmb-pg-*` directories in `tmp` that nothing has touched for [`STALE_AFTER`] (a running server
/// touches its socket lock file hourly). Best effort.
fn remove_stale(tmp: &Path) {
    let Ok(entries) = fs::read_dir(tmp) else {
        return;
    };
    let modified = |p: &Path| fs::symlink_metadata(p).and_then(|m| m.modified()).ok();
    for entry in entries.flatten() {
        if !entry.file_name().to_string_lossy().starts_with("nmb-pg-")
            || !entry.file_type().is_ok_and(|t| t.is_dir())
        {
            continue;
        }
        let dir = entry.path();
        let sock = fs::read_dir(dir.join("sock"))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| modified(&e.path()));
        let newest = modified(&dir).into_iter().chain(sock).max();
        if newest
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > STALE_AFTER)
        {
            let _ = fs::remove_dir_all(&dir);
        }
    }
}

/// A fresh `nmb-pg-*` directory (mode 0700) in the temporary folder.
fn make_dir(tmp: &Path) -> Result<PathBuf, String> {
    for attempt in 0..100u32 {
        let dir = tmp.join(format!(
            "nmb-pg-{}-{:x}{attempt}",
            std::process::id(),
            now_nanos() % (1 << 40)
        ));
        match fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(format!("creating {}: {e}", dir.display())),
        }
    }
    Err(format!("no free nmb-pg-* name in {}", tmp.display()))
}

/// The write end of the janitor's stdin. The server's keeper writes the server's pid to it, and `gone` once
/// it has exited; end-of-file (this process ended) sets the janitor off.
type Janitor = Arc<Mutex<ChildStdin>>;

/// Reads pids (or `gone`) until end-of-file, then kills the last server still running, waits (up to 10 s)
/// for it to go, and removes the directory `$1`. It ignores the terminal's signals: only this process's end
/// should set it off.
const JANITOR: &str = r#"trap '' HUP INT TERM QUIT
pid=
while read -r line; do
  case "$line" in gone) pid= ;; *) pid="$line" ;; esac
done
if [ -n "$pid" ]; then
  kill -KILL "$pid" 2>/dev/null
  i=0
  while [ "$i" -lt 100 ] && kill -0 "$pid" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
fi
for i in 1 2 3 4 5; do
  rm -rf "$1" 2>/dev/null
  [ -e "$1" ] || exit 0
  sleep 1
done
"#;

fn spawn_janitor(dir: &Path) -> Result<Janitor, String> {
    let mut child = Command::new("sh")
        .args(["-c", JANITOR, "nmb-pg-janitor"])
        .arg(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("starting sh (the cleanup janitor): {e}"))?;
    let stdin = child.stdin.take().expect("the janitor's stdin");
    // Not waited for: it outlives this process on purpose.
    drop(child);
    Ok(Arc::new(Mutex::new(stdin)))
}

fn tell(janitor: &Janitor, line: &str) {
    if let Ok(mut stdin) = janitor.lock() {
        let _ = writeln!(stdin, "{line}");
        let _ = stdin.flush();
    }
}

/// A command for the server's own programs (`initdb`, `postgres`): as `nobody` through `setpriv` when root,
/// with `pdeathsig` when asked and possible; in `dir` (which `nobody` can enter), with C messages and UTC.
fn server_command(setup: &Setup, dir: &Path, program: &str, pdeathsig: bool) -> Command {
    let program = setup.bin.join(program);
    let mut cmd = match setup.run_as {
        Some((uid, gid)) => {
            let mut cmd = Command::new("setpriv");
            cmd.arg(format!("--reuid={uid}"))
                .arg(format!("--regid={gid}"))
                .arg("--clear-groups");
            if pdeathsig {
                cmd.args(["--pdeathsig", "KILL"]);
            }
            cmd.arg("--").arg(program);
            cmd
        }
        None if pdeathsig && setup.setpriv => {
            let mut cmd = Command::new("setpriv");
            cmd.args(["--pdeathsig", "KILL", "--"]).arg(program);
            cmd
        }
        None => Command::new(program),
    };
    cmd.current_dir(dir)
        .env("LC_ALL", "C")
        .env("TZ", "UTC")
        .env_remove("PGDATA")
        .stdin(Stdio::null());
    cmd
}

/// The last `lines` lines of the file at `path`.
fn tail(path: &Path, lines: usize) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

fn free_port() -> Result<u16, String> {
    TcpListener::bind((HOST, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("finding a free port on {HOST}: {e}"))
}

/// Starts the server; `Err` is the panic message (password redacted).
fn start(setup: &Setup) -> Result<PgCluster, String> {
    let tmp = std::env::temp_dir();
    remove_stale(&tmp);
    let dir = make_dir(&tmp)?;
    let janitor = spawn_janitor(&dir)?;
    let password = random_password();
    let fail = |what: String| {
        let mut why = format!("PostgreSQL did not start: {what}");
        if setup.run_as.is_some() && what.contains("ermission denied") {
            why.push_str(&format!(
                "\n(running as root, the server runs as nobody, which must be able to reach {})",
                dir.display()
            ));
        }
        redact(&why, &password)
    };
    let pwfile = dir.join("pwfile");
    fs::write(&pwfile, format!("{password}\n"))
        .map_err(|e| fail(format!("writing {}: {e}", pwfile.display())))?;
    fs::DirBuilder::new()
        .mode(0o700)
        .create(dir.join("sock"))
        .map_err(|e| fail(format!("creating the socket folder: {e}")))?;
    if let Some((uid, gid)) = setup.run_as {
        let out = Command::new("chown")
            .arg("-R")
            .arg(format!("{uid}:{gid}"))
            .arg(&dir)
            .output()
            .map_err(|e| fail(format!("running chown: {e}")))?;
        if !out.status.success() {
            return Err(fail(format!(
                "chown -R {uid}:{gid} {}: {}",
                dir.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
    }

    let data = dir.join("data");
    let out = server_command(setup, &dir, "initdb", false)
        .arg("-D")
        .arg(&data)
        .args([
            "-U",
            USER,
            "--auth=scram-sha-256",
            "-E",
            "UTF8",
            "--no-locale",
        ])
        .args(["--no-sync", "--no-instructions"])
        .arg(format!("--pwfile={}", pwfile.display()))
        .output()
        .map_err(|e| fail(format!("running initdb: {e}")))?;
    let _ = fs::remove_file(&pwfile);
    if !out.status.success() {
        return Err(fail(format!(
            "initdb failed ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )));
    }

    let ca = make_certs(setup, &dir);
    // A Unix socket path is limited to 107 bytes; clients use TCP, so a long one is simply left out.
    let sock = dir.join("sock");
    let sock = if sock.as_os_str().len() <= 80 {
        sock.into_os_string()
    } else {
        Default::default()
    };
    let log = dir.join("server.log");
    // The port is free when chosen but may be taken before the server binds it: then try another.
    for attempt in 1..=3 {
        let port = free_port().map_err(&fail)?;
        let log_file = fs::File::options()
            .create(true)
            .append(true)
            .open(&log)
            .map_err(|e| fail(format!("opening {}: {e}", log.display())))?;
        let mut cmd = server_command(setup, &dir, "postgres", true);
        cmd.arg("-D")
            .arg(&data)
            .args(["-p", &port.to_string(), "-h", HOST, "-k"])
            .arg(&sock)
            .args(["-c", "fsync=off", "-c", "max_connections=200"])
            // Every fresh database writes its template into the WAL; left at the 1 GB default the WAL of one
            // test binary grew past 100 MB, and on a nearly full CI disk PostgreSQL stopped with "No space left
            // on device". Checkpoints are cheap with fsync off.
            .args(["-c", "max_wal_size=32MB", "-c", "min_wal_size=32MB"])
            .args(ca.iter().flat_map(|_| tls_settings(&dir)))
            .stdout(Stdio::from(
                log_file.try_clone().map_err(|e| fail(e.to_string()))?,
            ))
            .stderr(Stdio::from(log_file))
            .process_group(0);
        let exited = spawn_server(cmd, Arc::clone(&janitor)).map_err(&fail)?;
        match wait_ready(setup, port, &exited) {
            Ok(()) => {
                return Ok(PgCluster {
                    bin: setup.bin.clone(),
                    dir: dir.clone(),
                    port,
                    password: password.clone(),
                    ca: ca.clone(),
                    _janitor: janitor,
                });
            }
            Err(why) => {
                let log_tail = tail(&log, 40);
                if attempt < 3 && log_tail.contains("could not bind") {
                    continue;
                }
                return Err(fail(format!(
                    "{why}\n--- the end of {} ---\n{log_tail}",
                    log.display()
                )));
            }
        }
    }
    unreachable!("the last attempt returns")
}

/// A CA and a certificate for `127.0.0.1` signed by it, made with `openssl` in `dir` and readable by the server
/// alone. Returns the CA's PEM file, or `None` (the server then runs without TLS) when `openssl` fails.
fn make_certs(setup: &Setup, dir: &Path) -> Option<PathBuf> {
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    let ext = dir.join("san.ext");
    fs::write(
        &ext,
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n",
    )
    .ok()?;
    let steps: [Vec<&str>; 3] = [
        [
            &["req", "-x509"][..],
            &ec,
            &[
                "-keyout",
                "ca.key",
                "-out",
                "ca.pem",
                "-days",
                "3",
                "-subj",
                "/CN=nmb test CA",
            ],
        ]
        .concat(),
        [
            &["req"][..],
            &ec,
            &[
                "-keyout",
                "server.key",
                "-out",
                "server.csr",
                "-subj",
                "/CN=127.0.0.1",
            ],
        ]
        .concat(),
        vec![
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.crt",
            "-days",
            "3",
            "-extfile",
            "san.ext",
        ],
    ];
    for args in steps {
        let ok = Command::new("openssl")
            .args(&args)
            .current_dir(dir)
            .stdin(Stdio::null())
            .output()
            .is_ok_and(|o| o.status.success());
        if !ok {
            eprintln!(
                "postgres test server: openssl could not make a TLS certificate; TLS stays off"
            );
            return None;
        }
    }
    let key = dir.join("server.key");
    fs::set_permissions(&key, fs::Permissions::from_mode(0o600)).ok()?;
    if let Some((uid, gid)) = setup.run_as {
        std::os::unix::fs::chown(&key, Some(uid), Some(gid)).ok()?;
        std::os::unix::fs::chown(dir.join("server.crt"), Some(uid), Some(gid)).ok()?;
    }
    Some(dir.join("ca.pem"))
}

fn tls_settings(dir: &Path) -> Vec<String> {
    let file = |name: &str| dir.join(name).display().to_string();
    vec![
        "-c".into(),
        "ssl=on".into(),
        "-c".into(),
        format!("ssl_cert_file={}", file("server.crt")),
        "-c".into(),
        format!("ssl_key_file={}", file("server.key")),
    ]
}

/// Spawns `cmd` from a thread that lives as long as the server does: `pdeathsig` fires when the *thread*
/// that spawned a process ends, so it must not be a test's thread. The thread tells the janitor the pid, waits,
/// then tells it `gone`; the returned channel gets the exit status.
fn spawn_server(mut cmd: Command, janitor: Janitor) -> Result<mpsc::Receiver<ExitStatus>, String> {
    let (started_tx, started_rx) = mpsc::channel();
    let (exited_tx, exited_rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("nmb-pg-server".into())
        .spawn(move || {
            let mut child = match cmd.spawn() {
                Ok(child) => child,
                Err(e) => {
                    let _ = started_tx.send(Err(format!("starting postgres: {e}")));
                    return;
                }
            };
            tell(&janitor, &child.id().to_string());
            let _ = started_tx.send(Ok(()));
            let status = child.wait();
            tell(&janitor, "gone");
            if let Ok(status) = status {
                let _ = exited_tx.send(status);
            }
        })
        .map_err(|e| format!("starting the server's thread: {e}"))?;
    started_rx
        .recv()
        .map_err(|_| "the server's thread ended early".to_string())??;
    Ok(exited_rx)
}

/// Polls `pg_isready` until the server accepts connections, it exits, or [`READY_WITHIN`] passes.
fn wait_ready(setup: &Setup, port: u16, exited: &mpsc::Receiver<ExitStatus>) -> Result<(), String> {
    let started = Instant::now();
    let port = port.to_string();
    loop {
        if let Ok(status) = exited.try_recv() {
            return Err(format!("postgres exited ({status})"));
        }
        let ready = Command::new(tool(&setup.bin, "pg_isready"))
            .args(["-q", "-h", HOST, "-p", &port, "-t", "2"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map_err(|e| format!("running pg_isready: {e}"))?;
        if ready.success() {
            return Ok(());
        }
        if started.elapsed() > READY_WITHIN {
            return Err(format!(
                "postgres did not accept connections on {HOST}:{port} within {} s",
                READY_WITHIN.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn psql_takes_a_name_or_a_url() {
        assert_eq!(database_name("t_1_2"), "t_1_2");
        assert_eq!(
            database_name("postgres://nmb:pw@127.0.0.1:5/t_1_2"),
            "t_1_2"
        );
        assert_eq!(
            database_name("postgresql://nmb:pw@127.0.0.1:5/db?sslmode=disable"),
            "db"
        );
    }

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            redact("postgres://nmb:s3cret@h/db", "s3cret"),
            "postgres://nmb:***@h/db"
        );
        assert_eq!(redact("nothing", ""), "nothing");
        let pw = random_password();
        assert_eq!(pw.len(), 32);
        assert!(pw.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(pw, random_password());
    }
}
