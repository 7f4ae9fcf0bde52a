/* The native keeper: keeper.py's loop in C, for runs of many short nodes.

keeper.py is the reference. Its docstring states the protocol, the records in procs.jsonl and the rules
this file keeps: the lines of one turn in one write(2) before the replies that tell of them, lazy log
files, followers and drops, a node's process group killed at its exit, exit once the runner has closed
the request pipe and no node is left. The two are interchangeable (procs.py picks this one when it was
built) and the keeper tests run against both. What this one saves is the interpreter: on a DAG of
trivial nodes the Python keeper's own work per node was most of dagflow's overhead over a minimal
executor (benchmarks/local_overhead.py).

Built by hatch_build.py at install with the system C compiler; without one, dagflow uses keeper.py.
Usage: dagflow-keeper RUN_DIR, stdin the runner's requests, stdout the replies.
*/
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define WATCH_AFTER_S 0.05
#define READ_SIZE 65536

typedef struct {
    char *data;
    size_t len, cap;
} Buf;

static void *must(void *pointer) {
    if (pointer == NULL) {
        fputs("dagflow-keeper: out of memory\n", stderr);
        exit(71);
    }
    return pointer;
}

static void buf_add(Buf *buf, const void *data, size_t size) {
    if (buf->len + size > buf->cap) {
        size_t cap = buf->cap ? buf->cap : 4096;
        while (cap < buf->len + size) cap *= 2;
        buf->data = must(realloc(buf->data, cap));
        buf->cap = cap;
    }
    memcpy(buf->data + buf->len, data, size);
    buf->len += size;
}

static void buf_printf(Buf *buf, const char *format, ...) __attribute__((format(printf, 2, 3)));
static void buf_printf(Buf *buf, const char *format, ...) {
    char line[256];
    va_list args;
    va_start(args, format);
    int size = vsnprintf(line, sizeof line, format, args);
    va_end(args);
    buf_add(buf, line, (size_t)size < sizeof line ? (size_t)size : sizeof line - 1);
}

/* A JSON string, as json.loads reads it back (UTF-8 passes through; quotes, backslashes and control
   characters are escaped). */
static void buf_json_string(Buf *buf, const char *text) {
    buf_add(buf, "\"", 1);
    for (const unsigned char *c = (const unsigned char *)text; *c; c++) {
        if (*c == '"' || *c == '\\') {
            char escaped[2] = {'\\', (char)*c};
            buf_add(buf, escaped, 2);
        } else if (*c < 0x20) {
            buf_printf(buf, "\\u%04x", *c);
        } else {
            buf_add(buf, c, 1);
        }
    }
    buf_add(buf, "\"", 1);
}

static char *joined(const char *a, const char *b, const char *c, const char *d) {
    size_t size = strlen(a) + strlen(b) + strlen(c) + strlen(d) + 1;
    char *text = must(malloc(size));
    snprintf(text, size, "%s%s%s%s", a, b, c, d);
    return text;
}

static double clock_seconds(clockid_t clock) {
    struct timespec now;
    clock_gettime(clock, &now);
    return (double)now.tv_sec + (double)now.tv_nsec / 1e9;
}

/* A start request: its payload copied, the fields pointing into it. */
typedef struct {
    char *payload;
    char **fields;
    const char *node;
    long attempt;
    const char *program;
    char **argv;      /* NULL-terminated */
    char **env_add;   /* "KEY=VALUE" */
    long env_count;
    const char *after_node; /* the leader it waits for ("": start now) */
    long after_attempt;
} Request;

typedef struct {
    Request *request; /* owns the node's name */
    pid_t pid;
    double started;
    int read_fds[2]; /* -1 once closed */
    int logs[2];     /* -1 until its stream says something */
    int watched;
} Child;

static const char *logs_dir;
static int procs_fd, devnull, wake_r, wake_w;
static pid_t keeper_pid;
static Child **children;
static size_t n_children, cap_children;
static Request **pending; /* followers waiting for their leader's exit */
static size_t n_pending, cap_pending;
static Buf requests, records, replies;
static int runner_gone;
static int reading = 1; /* the request pipe is open */

static void free_request(Request *request) {
    if (request == NULL) return;
    free(request->argv);
    free(request->fields);
    free(request->payload);
    free(request);
}

static int same_key(const char *node, long attempt, const char *other_node, long other_attempt) {
    return attempt == other_attempt && strcmp(node, other_node) == 0;
}

/* --- replies ------------------------------------------------------------------------------------- */

/* A reply frame: kind, node and attempt, then the n_rest fields in rest. */
static void reply(char kind, const char *node, long attempt, const char *const *rest, int n_rest) {
    size_t header = replies.len;
    buf_add(&replies, "\0\0\0\0", 4); /* the length, once the payload is there */
    char head[32];
    int size = snprintf(head, sizeof head, "%c", kind);
    buf_add(&replies, head, (size_t)size + 1);
    buf_add(&replies, node, strlen(node) + 1);
    size = snprintf(head, sizeof head, "%ld", attempt);
    buf_add(&replies, head, (size_t)size);
    for (int i = 0; i < n_rest; i++) {
        buf_add(&replies, "", 1);
        buf_add(&replies, rest[i], strlen(rest[i]));
    }
    uint32_t length = (uint32_t)(replies.len - header - 4);
    unsigned char *bytes = (unsigned char *)replies.data + header;
    bytes[0] = length & 0xff;
    bytes[1] = (length >> 8) & 0xff;
    bytes[2] = (length >> 16) & 0xff;
    bytes[3] = length >> 24;
}

static void send_all(void) {
    if (records.len) { /* one write for this turn's records, always before the replies that tell of them */
        ssize_t ignored = write(procs_fd, records.data, records.len); /* a full disk: the runner still hears */
        (void)ignored;
        records.len = 0;
    }
    if (!replies.len) return;
    size_t offset = 0;
    while (!runner_gone && offset < replies.len) {
        ssize_t written = write(1, replies.data + offset, replies.len - offset);
        if (written < 0) {
            if (errno == EINTR) continue;
            runner_gone = 1; /* the runner died (EPIPE): the procs log is what a resume reads */
            break;
        }
        offset += (size_t)written;
    }
    replies.len = 0;
}

/* --- a node's output ------------------------------------------------------------------------------ */

static void write_log(Child *child, int stream, const char *data, size_t size) {
    int log = child->logs[stream];
    if (log < 0) {
        int append = child->request->attempt > 1; /* a retry adds to the earlier attempts' logs */
        char *path = joined(logs_dir, "/", child->request->node, stream ? ".err" : ".out");
        int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC);
        log = child->logs[stream] = open(path, flags, 0644);
        free(path);
        if (log < 0) return; /* a full disk loses the log, not the run */
        struct stat info;
        if (append && fstat(log, &info) == 0 && info.st_size > 0) {
            char banner[64];
            int size = snprintf(banner, sizeof banner, "\n=== dagflow: attempt %ld ===\n", child->request->attempt);
            ssize_t ignored = write(log, banner, (size_t)size);
            (void)ignored;
        }
    }
    ssize_t ignored = write(log, data, size);
    (void)ignored;
}

/* Copy what is readable now from stream (0 stdout, 1 stderr); 0 once it has ended. */
static int pump(Child *child, int stream) {
    static char data[READ_SIZE];
    int fd = child->read_fds[stream];
    if (fd < 0) return 0;
    for (;;) {
        ssize_t size = read(fd, data, sizeof data);
        if (size > 0) {
            write_log(child, stream, data, (size_t)size);
        } else if (size < 0 && errno == EINTR) {
            continue;
        } else {
            return size < 0 && errno == EAGAIN;
        }
    }
}

static void close_output(Child *child) {
    for (int stream = 0; stream < 2; stream++) {
        pump(child, stream);
        if (child->read_fds[stream] >= 0) close(child->read_fds[stream]);
        if (child->logs[stream] >= 0) close(child->logs[stream]);
        child->read_fds[stream] = child->logs[stream] = -1;
    }
}

/* --- starting nodes ------------------------------------------------------------------------------- */

static const int NODE_DEFAULT_SIGNALS[] = {SIGPIPE, SIGXFSZ, SIGINT, SIGHUP};

static char **node_environment(const Request *request) {
    size_t base = 0;
    while (environ[base]) base++;
    char **env = must(calloc(base + (size_t)request->env_count + 1, sizeof *env));
    size_t n = 0;
    for (size_t i = 0; i < base; i++) {
        const char *equals = strchr(environ[i], '=');
        if (equals == NULL) continue; /* not a variable (Python's os.environ leaves it out too) */
        size_t key = (size_t)(equals - environ[i]) + 1;
        int replaced = 0;
        for (long j = 0; j < request->env_count && !replaced; j++)
            replaced = strncmp(request->env_add[j], environ[i], key) == 0;
        if (!replaced) env[n++] = environ[i];
    }
    for (long j = 0; j < request->env_count; j++) env[n++] = request->env_add[j];
    env[n] = NULL;
    return env;
}

static int spawn(Request *request) {
    double started = clock_seconds(CLOCK_MONOTONIC); /* before the clone: the wall time covers its CPU time */
    int out[2] = {-1, -1}, err[2] = {-1, -1};
    int error = 0;
    if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0) error = errno;
    pid_t pid = 0;
    if (!error) {
        posix_spawn_file_actions_t actions;
        posix_spawnattr_t attributes;
        sigset_t defaults, empty;
        posix_spawn_file_actions_init(&actions);
        posix_spawn_file_actions_adddup2(&actions, devnull, 0);
        posix_spawn_file_actions_adddup2(&actions, out[1], 1);
        posix_spawn_file_actions_adddup2(&actions, err[1], 2);
        posix_spawnattr_init(&attributes);
        sigemptyset(&defaults);
        for (size_t i = 0; i < sizeof NODE_DEFAULT_SIGNALS / sizeof *NODE_DEFAULT_SIGNALS; i++)
            sigaddset(&defaults, NODE_DEFAULT_SIGNALS[i]);
        sigemptyset(&empty);
        posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
        posix_spawnattr_setpgroup(&attributes, 0);
        posix_spawnattr_setsigdefault(&attributes, &defaults);
        posix_spawnattr_setsigmask(&attributes, &empty);
        char **env = node_environment(request);
        error = posix_spawn(&pid, request->program, &actions, &attributes, request->argv, env);
        free(env);
        posix_spawn_file_actions_destroy(&actions);
        posix_spawnattr_destroy(&attributes);
    }
    if (error) {
        for (int i = 0; i < 2; i++) {
            if (out[i] >= 0) close(out[i]);
            if (err[i] >= 0) close(err[i]);
        }
        const char *why = strerror(error);
        reply('e', request->node, request->attempt, &why, 1);
        return 0;
    }
    close(out[1]);
    close(err[1]);
    fcntl(out[0], F_SETFL, O_NONBLOCK);
    fcntl(err[0], F_SETFL, O_NONBLOCK);
    Child *child = must(malloc(sizeof *child));
    *child = (Child){request, pid, started, {out[0], err[0]}, {-1, -1}, 0};
    if (n_children == cap_children) {
        cap_children = cap_children ? cap_children * 2 : 16;
        children = must(realloc(children, cap_children * sizeof *children));
    }
    children[n_children++] = child;
    buf_add(&records, "{\"n\":", 5);
    buf_json_string(&records, request->node);
    buf_printf(&records, ",\"a\":%ld,\"pid\":%d,\"k\":%d}\n", request->attempt, (int)pid, (int)keeper_pid);
    char pid_text[24];
    snprintf(pid_text, sizeof pid_text, "%d", (int)pid);
    const char *rest[] = {pid_text};
    reply('s', request->node, request->attempt, rest, 1);
    return 1;
}

/* The queue's entry of the request waiting for the leader (node, attempt); NULL if there is none. */
static Request **follower_of(const char *node, long attempt) {
    for (size_t i = 0; i < n_pending; i++)
        if (same_key(pending[i]->after_node, pending[i]->after_attempt, node, attempt)) return &pending[i];
    return NULL;
}

/* The request waiting for (node, attempt) by its own key; NULL if there is none. */
static Request **waiting_follower(const char *node, long attempt) {
    for (size_t i = 0; i < n_pending; i++)
        if (same_key(pending[i]->node, pending[i]->attempt, node, attempt)) return &pending[i];
    return NULL;
}

/* The request at entry, out of the queue (NULL for no entry). */
static Request *unqueue(Request **entry) {
    if (entry == NULL) return NULL;
    Request *request = *entry;
    *entry = pending[--n_pending];
    return request;
}

static Request *take_follower(const char *node, long attempt) {
    return unqueue(follower_of(node, attempt));
}

/* Spawn a node; if it cannot start, its follower starts instead (it leaves its slot at once). */
static void start(Request *request) {
    while (request != NULL && !spawn(request)) {
        Request *follower = take_follower(request->node, request->attempt);
        free_request(request);
        request = follower;
    }
}

static int is_live(const char *node, long attempt) {
    for (size_t i = 0; i < n_children; i++)
        if (same_key(children[i]->request->node, children[i]->request->attempt, node, attempt)) return 1;
    return 0;
}

static void drop(const char *node, long attempt) {
    /* none: started already (or never asked for), and the runner kills it */
    Request *request = unqueue(waiting_follower(node, attempt));
    while (request != NULL) {
        reply('d', request->node, request->attempt, NULL, 0);
        Request *follower = take_follower(request->node, request->attempt);
        free_request(request);
        request = follower;
    }
}

/* --- requests ------------------------------------------------------------------------------------- */

static void malformed(void) {
    fputs("dagflow-keeper: malformed request from the runner\n", stderr);
    exit(70);
}

static long number(const char *text) {
    char *end;
    errno = 0;
    long value = strtol(text, &end, 10);
    if (errno || end == text || *end) malformed();
    return value;
}

static void handle_request(const char *payload, size_t size) {
    Request *request = must(calloc(1, sizeof *request));
    request->payload = must(malloc(size + 1));
    memcpy(request->payload, payload, size);
    request->payload[size] = '\0';
    size_t n_fields = 1;
    for (size_t i = 0; i < size; i++) n_fields += request->payload[i] == '\0';
    char **fields = request->fields = must(calloc(n_fields, sizeof *fields));
    fields[0] = request->payload;
    for (size_t i = 0, f = 1; i < size; i++)
        if (request->payload[i] == '\0') fields[f++] = request->payload + i + 1;
    if (n_fields < 3 || strlen(fields[0]) != 1) malformed();
    char kind = fields[0][0];
    request->node = fields[1];
    request->attempt = number(fields[2]);
    if (kind == 's') {
        /* kind, node, attempt, program, argc, argv..., env count, KEY=VALUE..., after node, after attempt */
        if (n_fields < 9) malformed();
        request->program = fields[3];
        long argc = number(fields[4]);
        if (argc < 1 || (size_t)argc + 8 > n_fields) malformed();
        request->argv = must(calloc((size_t)argc + 1, sizeof *request->argv));
        memcpy(request->argv, fields + 5, (size_t)argc * sizeof *fields);
        request->env_count = number(fields[5 + argc]);
        if (request->env_count < 0 || (size_t)(8 + argc + request->env_count) != n_fields) malformed();
        request->env_add = fields + 6 + argc;
        const char *after = request->after_node = fields[6 + argc + request->env_count];
        long after_attempt = request->after_attempt = number(fields[7 + argc + request->env_count]);
        if (*after && (is_live(after, after_attempt) || waiting_follower(after, after_attempt))) {
            if (n_pending == cap_pending) {
                cap_pending = cap_pending ? cap_pending * 2 : 16;
                pending = must(realloc(pending, cap_pending * sizeof *pending));
            }
            pending[n_pending++] = request;
        } else {
            start(request);
        }
        return;
    }
    if (kind == 'n') {
        start(unqueue(waiting_follower(request->node, request->attempt)));
    } else if (kind == 'd') {
        drop(request->node, request->attempt);
    } else {
        malformed();
    }
    free_request(request);
}

/* Read what the runner wrote and act on each complete request; reading is 0 once it closed the pipe. */
static void read_requests(void) {
    char chunk[READ_SIZE];
    for (;;) {
        ssize_t size = read(0, chunk, sizeof chunk);
        if (size > 0) {
            buf_add(&requests, chunk, (size_t)size);
            continue;
        }
        if (size < 0 && errno == EINTR) continue;
        if (size < 0 && errno == EAGAIN) break;
        runner_gone = 1; /* followers not started yet are forgotten: no runner would hear of them */
        reading = 0;
        for (size_t i = 0; i < n_pending; i++) free_request(pending[i]);
        n_pending = 0;
        return;
    }
    size_t offset = 0;
    while (requests.len - offset >= 4) {
        const unsigned char *header = (const unsigned char *)requests.data + offset;
        size_t length = header[0] | header[1] << 8 | header[2] << 16 | (size_t)header[3] << 24;
        if (requests.len - offset - 4 < length) break;
        handle_request(requests.data + offset + 4, length);
        offset += 4 + length;
    }
    memmove(requests.data, requests.data + offset, requests.len - offset);
    requests.len -= offset;
}

/* --- exits ---------------------------------------------------------------------------------------- */

static void reap(void) {
    while (n_children) {
        int status;
        struct rusage usage;
        pid_t pid = wait4(-1, &status, WNOHANG, &usage);
        if (pid < 0 && errno == EINTR) continue;
        if (pid <= 0) return;
        size_t index = 0;
        while (index < n_children && children[index]->pid != pid) index++;
        if (index == n_children) continue;
        Child *child = children[index];
        children[index] = children[--n_children];
        int rc = WIFSIGNALED(status) ? -WTERMSIG(status) : WEXITSTATUS(status);
        double wall = clock_seconds(CLOCK_MONOTONIC) - child->started;
        double cpu = (double)usage.ru_utime.tv_sec + (double)usage.ru_utime.tv_usec / 1e6 +
                     (double)usage.ru_stime.tv_sec + (double)usage.ru_stime.tv_usec / 1e6;
        double ended = clock_seconds(CLOCK_REALTIME);
        kill(-pid, SIGKILL); /* whatever the node left in its process group goes with it, as under HTCondor */
        close_output(child);
        const Request *request = child->request;
        buf_add(&records, "{\"n\":", 5);
        buf_json_string(&records, request->node);
        buf_printf(&records, ",\"a\":%ld,\"pid\":%d,\"rc\":%d,\"w\":%.3f,\"c\":%.3f,\"m\":%ld,\"t\":%.3f}\n",
                   request->attempt, (int)pid, rc, wall, cpu, usage.ru_maxrss, ended);
        char texts[5][32];
        snprintf(texts[0], sizeof texts[0], "%d", rc);
        snprintf(texts[1], sizeof texts[1], "%.17g", wall);
        snprintf(texts[2], sizeof texts[2], "%.17g", cpu);
        snprintf(texts[3], sizeof texts[3], "%ld", usage.ru_maxrss);
        snprintf(texts[4], sizeof texts[4], "%.17g", ended);
        const char *rest[] = {texts[0], texts[1], texts[2], texts[3], texts[4]};
        reply('x', request->node, request->attempt, rest, 5);
        /* The runner writes a drop before it signals a leader: read it before starting the follower. */
        if (reading && follower_of(request->node, request->attempt)) read_requests();
        Request *follower = take_follower(request->node, request->attempt);
        free_request(child->request);
        free(child);
        if (follower != NULL) start(follower);
    }
}

static void on_child(int signum) {
    (void)signum;
    int saved = errno;
    ssize_t ignored = write(wake_w, "", 1);
    (void)ignored;
    errno = saved;
}

/* A node's pipes are watched only once it has run WATCH_AFTER_S: a shorter node's output is read at its
   exit, which saves the poll work for the many short nodes of a big DAG. */
static int poll_timeout(double now) {
    double next = -1;
    for (size_t i = 0; i < n_children; i++) {
        if (children[i]->watched) continue;
        double due = children[i]->started + WATCH_AFTER_S;
        if (next < 0 || due < next) next = due;
    }
    if (next < 0) return -1;
    return next <= now ? 0 : (int)((next - now) * 1000) + 1;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fputs("usage: dagflow-keeper RUN_DIR (started by dagflow's local engine)\n", stderr);
        return 2;
    }
    logs_dir = joined(argv[1], "/logs", "", "");
    char *procs = joined(argv[1], "/procs.jsonl", "", "");
    procs_fd = open(procs, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    free(procs);
    devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (procs_fd < 0 || devnull < 0) {
        perror("dagflow-keeper");
        return 1;
    }
    keeper_pid = getpid();
    signal(SIGINT, SIG_IGN); /* only the runner acts on these */
    signal(SIGHUP, SIG_IGN);
    signal(SIGPIPE, SIG_IGN); /* a dead runner is an EPIPE */
    signal(SIGXFSZ, SIG_IGN);
    int wake[2];
    if (pipe2(wake, O_CLOEXEC | O_NONBLOCK) < 0) {
        perror("dagflow-keeper");
        return 1;
    }
    wake_r = wake[0];
    wake_w = wake[1];
    struct sigaction action = {0};
    action.sa_handler = on_child;
    action.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sigemptyset(&action.sa_mask);
    sigaction(SIGCHLD, &action, NULL);
    fcntl(0, F_SETFL, fcntl(0, F_GETFL) | O_NONBLOCK);

    struct pollfd *fds = NULL;
    Child **owners = NULL;
    size_t cap_fds = 0;
    while (reading || n_children) {
        size_t n_fds = 0, need = 2 + 2 * n_children;
        if (need > cap_fds) {
            cap_fds = need * 2;
            fds = must(realloc(fds, cap_fds * sizeof *fds));
            owners = must(realloc(owners, cap_fds * sizeof *owners));
        }
        fds[n_fds++] = (struct pollfd){wake_r, POLLIN, 0};
        if (reading) fds[n_fds++] = (struct pollfd){0, POLLIN, 0};
        size_t first_node_fd = n_fds;
        for (size_t i = 0; i < n_children; i++) {
            if (!children[i]->watched) continue;
            for (int stream = 0; stream < 2; stream++) {
                if (children[i]->read_fds[stream] < 0) continue;
                owners[n_fds] = children[i];
                fds[n_fds++] = (struct pollfd){children[i]->read_fds[stream], POLLIN, 0};
            }
        }
        int ready = poll(fds, n_fds, poll_timeout(clock_seconds(CLOCK_MONOTONIC)));
        if (ready < 0 && errno != EINTR) {
            perror("dagflow-keeper: poll");
            return 1;
        }
        for (size_t i = first_node_fd; ready > 0 && i < n_fds; i++) {
            if (!fds[i].revents) continue;
            Child *child = owners[i];
            int stream = child->read_fds[0] == fds[i].fd ? 0 : 1;
            if (!pump(child, stream)) {
                close(fds[i].fd);
                child->read_fds[stream] = -1;
            }
        }
        if (ready > 0 && fds[0].revents) {
            char drain[512];
            while (read(wake_r, drain, sizeof drain) > 0) {
            }
        }
        if (ready > 0 && reading && fds[1].revents) read_requests();
        reap();
        double now = clock_seconds(CLOCK_MONOTONIC);
        for (size_t i = 0; i < n_children; i++)
            if (children[i]->started + WATCH_AFTER_S <= now) children[i]->watched = 1;
        send_all();
    }
    return 0;
}
