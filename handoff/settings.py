"""Django settings for Handoff.

Every setting that differs between a laptop and a cluster comes from an environment
variable with a default that lets a fresh checkout run; docs/configuration.md lists them.
"""

import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from handoff import demoenv


def envbool(name: str, default: str) -> bool:
    return os.getenv(name, default).strip().lower() in ("1", "true", "yes", "on")


def envint(name: str, default: str) -> int:
    return int(os.getenv(name, default))


def envlist(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.getenv(name, default).split(",") if item.strip()]


BASE_DIR = Path(__file__).resolve().parent.parent
# Runtime state of a local run (SQLite database, private Redis, logs, beat schedule).
RUN_DIR = Path(os.getenv("HANDOFF_RUN_DIR", str(BASE_DIR / ".run")))

# DEBUG unset: a checkout on a laptop (plain HTTP, static files straight from the apps'
# folders, a development key) without Django's debug pages, which show code and settings
# to whoever makes a request fail. DEBUG=1 adds them; DEBUG=0 is production.
DEBUG = envbool("DEBUG", "False")
PRODUCTION = bool(os.getenv("DEBUG", "").strip()) and not DEBUG
LOCAL = not PRODUCTION
HANDOFF_DEMO = envbool("HANDOFF_DEMO", "False")
# Content-Security-Policy of every page (webui/middleware.py); empty turns it off.
HANDOFF_CSP = os.getenv(
    "HANDOFF_CSP",
    "default-src 'self'; script-src 'self' 'unsafe-eval'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data: blob:; font-src 'self' data:; connect-src 'self'; "
    "worker-src 'self' blob:; object-src 'none'; base-uri 'self'; form-action 'self'; "
    "frame-ancestors 'none'",
)
DEMO_USERNAME = "demo"

SECRET_KEY = os.getenv("SECRET_KEY", "")
if not SECRET_KEY:
    if PRODUCTION and not HANDOFF_DEMO:
        raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is off")
    # Good enough for a laptop; the prefix makes `check --deploy` flag it elsewhere.
    SECRET_KEY = "django-insecure-handoff-local-development-key-do-not-deploy"

ALLOWED_HOSTS = envlist("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]")
CSRF_TRUSTED_ORIGINS = envlist("CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "daphne",  # First, so `runserver` serves ASGI (websockets) too.
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "channels",
    "handoff",
    "webui",
]

MIDDLEWARE = [
    "webui.timing.ServerTimingMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "webui.middleware.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Before LoginRequiredMiddleware, so demo visitors are signed in rather than redirected.
    "webui.middleware.DemoSignInMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "handoff.urls"
WSGI_APPLICATION = "handoff.wsgi.application"
ASGI_APPLICATION = "handoff.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "webui.context_processors.handoff",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.config(
        default=f"sqlite:///{RUN_DIR / 'db.sqlite3'}",
        conn_max_age=envint("DATABASE_CONN_MAX_AGE", "0"),
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    if "DATABASE_URL" not in os.environ:
        # A fresh checkout has no .run/ yet; SQLite creates the file, not its folder.
        RUN_DIR.mkdir(parents=True, exist_ok=True)
    # The web server, workers and beat share one file: WAL lets readers and a writer coexist.
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL;",
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
# Locally WhiteNoise serves straight from the apps' static/ folders; no collectstatic needed.
STATIC_ROOT = os.getenv("STATIC_ROOT") or (None if LOCAL else str(BASE_DIR / "static-collected"))
WHITENOISE_USE_FINDERS = LOCAL
WHITENOISE_AUTOREFRESH = LOCAL
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        # The manifest needs `collectstatic`, which the Docker image runs; a checkout doesn't.
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if LOCAL
        else "whitenoise.storage.CompressedManifestStaticFilesStorage",
    },
}

# Production hardening (DEBUG=0). Each default can be overridden one by one.
SECURE_SSL_REDIRECT = envbool("SECURE_SSL_REDIRECT", str(PRODUCTION))
# Probes speak plain HTTP to the pod; a redirect would read as "down".
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
SESSION_COOKIE_SECURE = envbool("SESSION_COOKIE_SECURE", str(PRODUCTION))
CSRF_COOKIE_SECURE = envbool("CSRF_COOKIE_SECURE", str(PRODUCTION))
SECURE_HSTS_SECONDS = envint("SECURE_HSTS_SECONDS", "31536000" if PRODUCTION else "0")
SECURE_HSTS_INCLUDE_SUBDOMAINS = envbool("SECURE_HSTS_INCLUDE_SUBDOMAINS", str(PRODUCTION))
SECURE_HSTS_PRELOAD = envbool("SECURE_HSTS_PRELOAD", "False")
if envbool("SECURE_PROXY_SSL_HEADER", "False"):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SILENCED_SYSTEM_CHECKS = []
if not SECURE_HSTS_PRELOAD:
    # Asking browsers to preload a domain is a per-domain commitment that is hard to undo,
    # so it stays the operator's explicit choice rather than a warning to "fix".
    SILENCED_SYSTEM_CHECKS.append("security.W021")

# REDIS_URL, else the Redis of a `make demo` running on this checkout (it publishes
# RUN_DIR/demo.json), else the local default. REDIS_URL_FROM says which, for messages.
DEMO_SERVICES = None if os.getenv("REDIS_URL") else demoenv.published(RUN_DIR)
if os.getenv("REDIS_URL"):
    REDIS_URL, REDIS_URL_FROM = os.environ["REDIS_URL"], "REDIS_URL"
elif DEMO_SERVICES and DEMO_SERVICES.get("redis_url"):
    REDIS_URL, REDIS_URL_FROM = DEMO_SERVICES["redis_url"], str(RUN_DIR / demoenv.FILE)
else:
    REDIS_URL, REDIS_URL_FROM = "redis://127.0.0.1:6379/0", "the default"


# Every websocket joins its cluster's group through this pool; redis-py refuses (rather
# than waits) past max_connections, so a burst of browsers reconnecting after a deploy
# needs room: one Daphne holds a connection per concurrent group_add/send.
# Each consumer waits for its next message with a 5 s BZPOPMIN; redis-py 8 reads every
# socket with a 5 s timeout by default, which killed every quiet websocket after ~5 s
# (the browser reconnected). The read must outlast the wait, with room for a busy loop.
def channel_layers(url: str) -> dict:
    """The channel layer on the Redis at ``url`` (the tests' own Redis gets the same)."""
    host = {
        "address": url,
        "max_connections": envint("HANDOFF_CHANNEL_REDIS_CONNECTIONS", "1000"),
        "socket_timeout": envint("HANDOFF_CHANNEL_REDIS_READ_TIMEOUT", "30"),
    }
    return {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [host]},
        }
    }


CHANNEL_LAYERS = channel_layers(REDIS_URL)

# Celery reads every CELERY_* setting below (see handoff/celery.py).
CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = REDIS_URL
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_TIMEZONE = TIME_ZONE
CELERY_BEAT_SCHEDULE_FILENAME = str(RUN_DIR / "celerybeat-schedule")

# Workers prove they consume tasks by running this heartbeat; /healthz reads its age.
HANDOFF_HEARTBEAT_INTERVAL = envint("HANDOFF_HEARTBEAT_INTERVAL", "5")
HANDOFF_HEARTBEAT_STALE_AFTER = envint("HANDOFF_HEARTBEAT_STALE_AFTER", "30")
CELERY_BEAT_SCHEDULE = {
    "heartbeat": {
        "task": "handoff.tasks.heartbeat",
        "schedule": HANDOFF_HEARTBEAT_INTERVAL,
        # A heartbeat queued while no worker ran proves nothing once one is back.
        "options": {"expires": HANDOFF_HEARTBEAT_INTERVAL * 2},
    },
}

LOG_LEVEL = os.getenv("LOG_LEVEL", "INFO").upper()
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"},
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": "plain"},
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        "django": {"handlers": ["console"], "level": LOG_LEVEL, "propagate": False},
    },
}

# Live ingestion (handoff/tasks.py, handoff/live/): watch windows, leases, the fold's
# coalescing and retention, read by handoff/conf.py and handed to handoff/live.
# docs/configuration.md lists them.
HANDOFF_WATCH_WINDOW = envint("HANDOFF_WATCH_WINDOW", "300")
HANDOFF_WATCH_SERVER_TIMEOUT = envint("HANDOFF_WATCH_SERVER_TIMEOUT", "240")
HANDOFF_WATCH_READ_TIMEOUT = envint("HANDOFF_WATCH_READ_TIMEOUT", "90")
# The longest wait between retries of a failing stream: health recovers within it.
HANDOFF_WATCH_BACKOFF_CAP = envint("HANDOFF_WATCH_BACKOFF_CAP", "30")
HANDOFF_LEASE_TTL = envint("HANDOFF_LEASE_TTL", "6")
HANDOFF_SUPERVISE_INTERVAL = envint("HANDOFF_SUPERVISE_INTERVAL", "3")
# A stream host (one per watch worker process) holds up to this many streams, each a
# thread; it reconciles against the cluster registry every HANDOFF_HOST_INTERVAL seconds,
# so an added or removed cluster takes effect within that (docs/scaling.md).
HANDOFF_STREAMS_PER_WORKER = envint("HANDOFF_STREAMS_PER_WORKER", "100")
HANDOFF_HOST_INTERVAL = envint("HANDOFF_HOST_INTERVAL", "2")
HANDOFF_STUCK_AFTER = envint("HANDOFF_STUCK_AFTER", "60")
# Daphne processes `manage.py serve` starts on one listening socket: one process runs every
# view on one thread, so one per core the web may use (docs/scaling.md).
HANDOFF_WEB_PROCESSES = envint("HANDOFF_WEB_PROCESSES", str(len(os.sched_getaffinity(0))))
# The nice `manage.py serve` gives the web's session while a fold is behind its stream, so
# page loads cannot starve ingestion on shared cores (handoff/live/yielding.py).
HANDOFF_WEB_NICE = envint("HANDOFF_WEB_NICE", "5")
# A web process's garbage collector (webui/runtime.py): the young generation's threshold,
# its loaded application frozen out of collections; 0 keeps Python's collector as it is.
HANDOFF_WEB_GC_THRESHOLD = envint("HANDOFF_WEB_GC_THRESHOLD", "10000")
# A web process's GIL switch interval in microseconds (webui/runtime.py); 0: Python's 5 ms.
HANDOFF_WEB_SWITCH_INTERVAL_US = envint("HANDOFF_WEB_SWITCH_INTERVAL_US", "500")
HANDOFF_PUSH_INTERVAL_MS = envint("HANDOFF_PUSH_INTERVAL_MS", "50")
HANDOFF_SNAPSHOT_INTERVAL = envint("HANDOFF_SNAPSHOT_INTERVAL", "60")
HANDOFF_SNAPSHOT_EVENTS = envint("HANDOFF_SNAPSHOT_EVENTS", "20000")
HANDOFF_RETENTION_HOURS = envint("HANDOFF_RETENTION_HOURS", "24")
HANDOFF_STREAM_MAXLEN = envint("HANDOFF_STREAM_MAXLEN", "2000000")
CELERY_TASK_ROUTES = {
    "handoff.tasks.watch": {"queue": "watch"},
    "handoff.tasks.fold": {"queue": "watch"},
    "handoff.tasks.simulate": {"queue": "watch"},
    "handoff.tasks.host": {"queue": "watch"},
}
# Stream hosts run until the worker stops: a worker process takes one task at a time, so a
# task waiting in the queue goes to a free process instead of queueing behind a busy one.
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Nor does a busy worker reserve one more (Celery 5.6+, Redis broker): a stream host that
# supervise starts when the pool is full waits in the queue for any free process, not in a
# full worker's hands.
CELERY_WORKER_DISABLE_PREFETCH = True
CELERY_BEAT_SCHEDULE["supervise"] = {
    "task": "handoff.tasks.supervise",
    "schedule": HANDOFF_SUPERVISE_INTERVAL,
    "options": {"expires": HANDOFF_SUPERVISE_INTERVAL * 2},
}
# When a stream makes /healthz answer 503 (handoff/health.py): this many failed API calls
# in a row, no holder for this long, no word from the API server (events, bookmarks or a
# watch that ended normally) for this long, or the fold this far behind its stream.
HANDOFF_STREAM_ERROR_LIMIT = envint("HANDOFF_STREAM_ERROR_LIMIT", "3")
HANDOFF_STREAM_UNHELD_LIMIT = envint("HANDOFF_STREAM_UNHELD_LIMIT", "30")
HANDOFF_STREAM_SILENCE_LIMIT = envint("HANDOFF_STREAM_SILENCE_LIMIT", "300")
HANDOFF_FOLD_LAG_LIMIT = envint("HANDOFF_FOLD_LAG_LIMIT", "30")

# Replay (webui/detail/traces.py): server-side traces are listed from one folder, never
# opened by path; uploads are size-limited and kept under their content hash.
HANDOFF_REPLAY_DIR = os.getenv("HANDOFF_REPLAY_DIR", str(RUN_DIR / "traces"))
HANDOFF_REPLAY_UPLOAD_DIR = os.getenv("HANDOFF_REPLAY_UPLOAD_DIR", str(RUN_DIR / "uploads"))
HANDOFF_REPLAY_MAX_UPLOAD_BYTES = envint("HANDOFF_REPLAY_MAX_UPLOAD_MB", "64") * 1024 * 1024
HANDOFF_REPLAY_CACHE = envint("HANDOFF_REPLAY_CACHE", "4")  # folded traces kept per process
HANDOFF_REPLAY_UPLOADS_PER_HOUR = envint("HANDOFF_REPLAY_UPLOADS_PER_HOUR", "30")  # per user
# plotly.js is served from the installed `plotly` package as static/webui/vendor/plotly.min.js.
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
    "webui.detail.plotlyjs.PlotlyFinder",
]

# /metrics: when set, Prometheus authenticates with "Authorization: Bearer <token>" instead
# of a signed-in session (docs/interop.md).
HANDOFF_METRICS_TOKEN = os.getenv("HANDOFF_METRICS_TOKEN", "")
# The JSON API (/api/...): when set, scripts such as `kubectl handoff` read it with
# "Authorization: Bearer <token>" instead of a session (docs/api.md).
HANDOFF_API_TOKEN = os.getenv("HANDOFF_API_TOKEN", "")
