"""kvedge from Python: a ctypes binding of the C API (include/kvedge.h).

No compiled extension: it loads libkvedge.so from $KVEDGE_LIBRARY (a path),
else the loader's search path (an installed libkvedge0). Errors raise
KvedgeError carrying kvedge's status and message.

    model = kvedge.Model("models/stories260K.gguf")
    session = kvedge.Session(model, budget_bytes=64 * 1024, temperature=0)
    session.feed("Once upon a time")
    for piece in session.generate(100):
        print(piece, end="")

Threads: as the C API; a Model may be shared, a Session is used by one thread
at a time. ctypes releases the GIL during each call.
"""

import codecs
import ctypes
import ctypes.util
import dataclasses
import os

ABI_VERSION = 0  # KVEDGE_ABI_VERSION of the header this binding mirrors

# kvedge_status values (include/kvedge.h).
OK = 0
INVALID_ARGUMENT = 1
NOT_FOUND = 2
CORRUPT = 3
UNSUPPORTED = 4
OUT_OF_BUDGET = 5
CONTEXT_FULL = 6
BUFFER_TOO_SMALL = 7
FAILED_PRECONDITION = 8
IO = 9
OUT_OF_MEMORY = 10
INTERNAL = 11


class KvedgeError(Exception):
    """A failed kvedge call: `status` (an int above), `status_name`, `message`."""

    def __init__(self, status, status_name, message):
        super().__init__(f"{status_name}: {message}")
        self.status = status
        self.status_name = status_name
        self.message = message


class _ModelInfo(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("name", ctypes.c_char_p), ("format", ctypes.c_char_p),
                ("vocab_size", ctypes.c_int32), ("context_length", ctypes.c_int32),
                ("n_layers", ctypes.c_int32), ("dim", ctypes.c_int32), ("hidden_dim", ctypes.c_int32),
                ("n_heads", ctypes.c_int32), ("n_kv_heads", ctypes.c_int32), ("head_dim", ctypes.c_int32),
                ("bos_token", ctypes.c_int32), ("eos_token", ctypes.c_int32), ("weight_bytes", ctypes.c_uint64)]


class _SessionConfig(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("policy", ctypes.c_char_p), ("key_format", ctypes.c_char_p),
                ("value_format", ctypes.c_char_p), ("sinks", ctypes.c_int32), ("heavy", ctypes.c_int32),
                ("window", ctypes.c_int32), ("capacity_tokens", ctypes.c_int32),
                ("budget_bytes", ctypes.c_uint64), ("positions", ctypes.c_char_p), ("h2o_decay", ctypes.c_float),
                ("threads", ctypes.c_int32), ("max_batch", ctypes.c_int32), ("temperature", ctypes.c_float),
                ("top_k", ctypes.c_int32), ("top_p", ctypes.c_float), ("seed", ctypes.c_uint64)]


class _Stats(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("tokens_seen", ctypes.c_uint64), ("tokens_held", ctypes.c_uint64),
                ("tokens_evicted", ctypes.c_uint64), ("capacity_tokens", ctypes.c_uint64),
                ("arena_bytes", ctypes.c_uint64), ("held_bytes", ctypes.c_uint64),
                ("f16_full_bytes", ctypes.c_uint64), ("reserved_bytes", ctypes.c_uint64),
                ("compression", ctypes.c_double)]


@dataclasses.dataclass(frozen=True)
class ModelInfo:
    """What kvedge_model_get_info reports."""
    name: str
    format: str
    vocab_size: int
    context_length: int
    n_layers: int
    dim: int
    hidden_dim: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    bos_token: int
    eos_token: int
    weight_bytes: int


@dataclasses.dataclass(frozen=True)
class Stats:
    """A session's KV cache and memory (kvedge_session_stats)."""
    tokens_seen: int      # tokens fed over the session's life
    tokens_held: int      # tokens in the cache now
    tokens_evicted: int
    capacity_tokens: int  # tokens the cache holds at most
    arena_bytes: int      # KV arena, reserved once
    held_bytes: int       # cache storage holding tokens now
    f16_full_bytes: int   # what an f16 cache of every token seen would need
    reserved_bytes: int   # everything the session reserved: arena + scratch
    compression: float    # f16_full_bytes / held_bytes; 0 before any token


_PIECE_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_char), ctypes.c_size_t, ctypes.c_void_p)

_SIGNATURES = {
    # name: (restype, argtypes)
    "kvedge_abi_version": (ctypes.c_int32, []),
    "kvedge_version": (ctypes.c_char_p, []),
    "kvedge_status_name": (ctypes.c_char_p, [ctypes.c_int]),
    "kvedge_last_error": (ctypes.c_char_p, []),
    "kvedge_model_load": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]),
    "kvedge_model_free": (None, [ctypes.c_void_p]),
    "kvedge_model_get_info_sized": (ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(_ModelInfo)]),
    "kvedge_tokenize": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int,
                                       ctypes.POINTER(ctypes.c_int32), ctypes.c_size_t,
                                       ctypes.POINTER(ctypes.c_size_t)]),
    "kvedge_token_piece": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_int32, ctypes.c_int32,
                                          ctypes.POINTER(ctypes.POINTER(ctypes.c_char)),
                                          ctypes.POINTER(ctypes.c_size_t)]),
    "kvedge_session_config_init_sized": (ctypes.c_int, [ctypes.POINTER(_SessionConfig)]),
    "kvedge_session_create": (ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(_SessionConfig),
                                             ctypes.POINTER(ctypes.c_void_p)]),
    "kvedge_session_free": (None, [ctypes.c_void_p]),
    "kvedge_session_feed_tokens": (ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int32), ctypes.c_size_t]),
    "kvedge_session_feed_text": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]),
    "kvedge_session_sample": (ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int32)]),
    "kvedge_session_logits": (ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(ctypes.POINTER(ctypes.c_float)),
                                             ctypes.POINTER(ctypes.c_int32)]),
    "kvedge_session_stats_sized": (ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(_Stats)]),
    "kvedge_session_generate": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_int32, _PIECE_CALLBACK, ctypes.c_void_p,
                                               ctypes.POINTER(ctypes.c_int32)]),
    "kvedge_session_save": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p]),
    "kvedge_session_load": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p]),
    "kvedge_chat_create": (ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(_SessionConfig), ctypes.c_char_p,
                                          ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]),
    "kvedge_chat_free": (None, [ctypes.c_void_p]),
    "kvedge_chat_add_message": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p]),
    "kvedge_chat_generate_reply": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_int32, _PIECE_CALLBACK, ctypes.c_void_p,
                                                  ctypes.POINTER(ctypes.c_int32)]),
    "kvedge_chat_reset": (ctypes.c_int, [ctypes.c_void_p]),
    "kvedge_chat_message_count": (ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]),
    "kvedge_chat_message": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_char_p),
                                           ctypes.POINTER(ctypes.c_char_p)]),
    "kvedge_chat_stats_sized": (ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(_Stats)]),
    "kvedge_chat_save": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p]),
    "kvedge_chat_load": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p]),
}


def _load_library():
    path = os.environ.get("KVEDGE_LIBRARY") or ctypes.util.find_library("kvedge") or f"libkvedge.so.{ABI_VERSION}"
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise ImportError(f"kvedge: cannot load the shared library '{path}' ({e}); install libkvedge0 or set "
                          f"KVEDGE_LIBRARY to the path of libkvedge.so") from e
    for name, (restype, argtypes) in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    abi = lib.kvedge_abi_version()
    if abi != ABI_VERSION:
        raise ImportError(f"kvedge: '{path}' has ABI {abi}; this binding needs ABI {ABI_VERSION}")
    return lib


_lib = _load_library()


def version():
    """The library's version, "MAJOR.MINOR.PATCH"."""
    return _lib.kvedge_version().decode()


def _check(status):
    if status != OK:
        raise KvedgeError(status, _lib.kvedge_status_name(status).decode(),
                          _lib.kvedge_last_error().decode("utf-8", "replace"))


def _utf8(text):
    """UTF-8 bytes for a C string; a NUL inside would silently cut it short."""
    data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
    if b"\0" in data:
        raise ValueError(f"kvedge: text contains a NUL character at byte {data.index(0)}")
    return data


def _path(path):
    return _utf8(os.fspath(path))


def _session_config(who, config):
    """A kvedge_session_config: kvedge's defaults, then the keyword settings."""
    known = {name for name, _ in _SessionConfig._fields_} - {"size"}
    unknown = sorted(set(config) - known)
    if unknown:
        raise TypeError(f"{who}: unknown setting(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    c = _SessionConfig(size=ctypes.sizeof(_SessionConfig))
    _check(_lib.kvedge_session_config_init_sized(ctypes.byref(c)))
    for name, value in config.items():
        setattr(c, name, _utf8(value) if isinstance(value, str) else value)
    return c


def _stats(fill, handle):
    """A Stats dataclass from kvedge_session_stats_sized or kvedge_chat_stats_sized."""
    s = _Stats(size=ctypes.sizeof(_Stats))
    _check(fill(handle, ctypes.byref(s)))
    return Stats(**{name: getattr(s, name) for name, _ in _Stats._fields_ if name != "size"})


class _Handle:
    """Owns one kvedge handle, released by `_free` on close(), at the end of a
    `with` block, or when the object is dropped."""

    _free = None  # the kvedge_*_free function, set by each subclass
    _handle = None

    def _ptr(self):
        if self._handle is None:
            raise ValueError(f"kvedge.{type(self).__name__} is closed")
        return self._handle

    def close(self):
        """Releases the handle (a Model stays alive while sessions and chats use it)."""
        if self._handle is not None:
            type(self)._free(self._handle)
            self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()


class Model(_Handle):
    """A loaded model (GGUF or llama2.c checkpoint) and its tokenizer.

    `tokenizer` names a llama2.c tokenizer.bin; a GGUF carries its own. The
    weights are memory-mapped. Sessions keep their model alive, so a Model
    may be closed before its sessions.
    """

    _free = _lib.kvedge_model_free

    def __init__(self, path, tokenizer=None):
        handle = ctypes.c_void_p()
        _check(_lib.kvedge_model_load(_path(path), None if tokenizer is None else _path(tokenizer),
                                      ctypes.byref(handle)))
        self._handle = handle
        info = _ModelInfo(size=ctypes.sizeof(_ModelInfo))
        _check(_lib.kvedge_model_get_info_sized(self._handle, ctypes.byref(info)))
        self.info = ModelInfo(**{name: (getattr(info, name).decode() if name in ("name", "format")
                                        else getattr(info, name))
                                 for name, _ in _ModelInfo._fields_ if name != "size"})

    def tokenize(self, text, add_bos=True):
        """The token ids of `text` (str or UTF-8 bytes), BOS first if add_bos."""
        data = _utf8(text)
        n = ctypes.c_size_t()
        status = _lib.kvedge_tokenize(self._ptr(), data, int(add_bos), None, 0, ctypes.byref(n))
        if status != BUFFER_TOO_SMALL:
            _check(status)
        ids = (ctypes.c_int32 * n.value)()
        _check(_lib.kvedge_tokenize(self._ptr(), data, int(add_bos), ids, n.value, ctypes.byref(n)))
        return list(ids)

    def token_piece(self, token, prev_token=-1):
        """The bytes `token` adds to text after `prev_token` (-1: none)."""
        piece = ctypes.POINTER(ctypes.c_char)()
        n = ctypes.c_size_t()
        _check(_lib.kvedge_token_piece(self._ptr(), prev_token, token, ctypes.byref(piece), ctypes.byref(n)))
        return ctypes.string_at(piece, n.value)



class Session(_Handle):
    """One token stream over a Model with its own bounded KV cache.

    Keyword arguments are the fields of kvedge_session_config (policy,
    key_format, value_format, sinks, heavy, window, capacity_tokens,
    budget_bytes, positions, h2o_decay, threads, max_batch, temperature,
    top_k, top_p, seed); the rest keep kvedge's defaults. All memory is
    reserved here.
    """

    _free = _lib.kvedge_session_free

    def __init__(self, model, **config):
        c = _session_config("kvedge.Session", config)
        handle = ctypes.c_void_p()
        _check(_lib.kvedge_session_create(model._ptr(), ctypes.byref(c), ctypes.byref(handle)))
        self._handle = handle
        self.model = model
        # One callback for the session's life: kvedge_session_generate hands it
        # each token's bytes. It holds the list, not self, so that dropping the
        # last reference frees the session at once (no cycle to collect).
        pieces = []
        self._pieces = pieces
        self._callback = _PIECE_CALLBACK(lambda piece, n, user: pieces.append(ctypes.string_at(piece, n)) or 0)

    def feed(self, text_or_tokens, add_bos=True):
        """Feeds text (str or UTF-8 bytes; BOS first if add_bos) or a list of token ids."""
        if isinstance(text_or_tokens, (str, bytes)):
            _check(_lib.kvedge_session_feed_text(self._ptr(), _utf8(text_or_tokens), int(add_bos)))
        else:
            ids = (ctypes.c_int32 * len(text_or_tokens))(*text_or_tokens)
            _check(_lib.kvedge_session_feed_tokens(self._ptr(), ids, len(ids)))

    def sample(self):
        """The next token id from the current logits (not fed)."""
        token = ctypes.c_int32()
        _check(_lib.kvedge_session_sample(self._ptr(), ctypes.byref(token)))
        return token.value

    def logits(self):
        """A copy of the logits after the last fed token."""
        ptr = ctypes.POINTER(ctypes.c_float)()
        n = ctypes.c_int32()
        _check(_lib.kvedge_session_logits(self._ptr(), ctypes.byref(ptr), ctypes.byref(n)))
        return ptr[:n.value]

    def generate_bytes(self, max_tokens):
        """Yields the bytes of up to max_tokens generated tokens, one token per
        step (sample, feed, piece: kvedge_session_generate). Stops at EOS."""
        generated = ctypes.c_int32()
        for _ in range(max_tokens):
            self._pieces.clear()
            _check(_lib.kvedge_session_generate(self._ptr(), 1, self._callback, None, ctypes.byref(generated)))
            if generated.value == 0:  # EOS: nothing fed
                return
            yield b"".join(self._pieces)

    def generate(self, max_tokens):
        """Yields text pieces of up to max_tokens generated tokens, lazily: stop
        iterating and nothing more is generated. Stops at EOS. A character
        whose UTF-8 bytes span tokens comes out whole, with the last of them."""
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        for piece in self.generate_bytes(max_tokens):
            text = decoder.decode(piece)
            if text:
                yield text
        tail = decoder.decode(b"", final=True)
        if tail:
            yield tail

    def stats(self):
        """The cache's state now, as a Stats dataclass."""
        return _stats(_lib.kvedge_session_stats_sized, self._ptr())

    def save(self, path):
        """Saves the whole state to `path`, atomically (kvedge_session_save)."""
        _check(_lib.kvedge_session_save(self._ptr(), _path(path)))

    def load(self, path):
        """Restores a state saved over the same model and KV configuration
        (kvedge_session_load); on error the session is as it was."""
        _check(_lib.kvedge_session_load(self._ptr(), _path(path)))


class Chat(_Handle):
    """A conversation on its own session (kvedge_chat): messages rendered
    through the chat template (`template`, else the model's, else ChatML);
    each reply feeds the cache only the text it has not seen.

    Keyword arguments are Session's settings. One thread at a time.
    """

    _free = _lib.kvedge_chat_free

    def __init__(self, model, system_prompt=None, template=None, **config):
        c = _session_config("kvedge.Chat", config)
        handle = ctypes.c_void_p()
        _check(_lib.kvedge_chat_create(model._ptr(), ctypes.byref(c),
                                       None if system_prompt is None else _utf8(system_prompt),
                                       None if template is None else _utf8(template), ctypes.byref(handle)))
        self._handle = handle
        self.model = model

    def add_message(self, role, content):
        """Appends a message; nothing is fed until reply()."""
        _check(_lib.kvedge_chat_add_message(self._ptr(), _utf8(role), _utf8(content)))

    def reply(self, max_tokens=512):
        """Generates the assistant's reply (at most max_tokens tokens), appends
        it to the conversation and returns its text."""
        pieces = []
        callback = _PIECE_CALLBACK(lambda piece, n, user: pieces.append(ctypes.string_at(piece, n)) or 0)
        _check(_lib.kvedge_chat_generate_reply(self._ptr(), max_tokens, callback, None, None))
        return b"".join(pieces).decode("utf-8", "replace")

    def reset(self):
        """Forgets every message but the system prompt and empties the cache."""
        _check(_lib.kvedge_chat_reset(self._ptr()))

    def messages(self):
        """The conversation as a list of (role, content) pairs."""
        count = ctypes.c_size_t()
        _check(_lib.kvedge_chat_message_count(self._ptr(), ctypes.byref(count)))
        out = []
        for i in range(count.value):
            role, content = ctypes.c_char_p(), ctypes.c_char_p()
            _check(_lib.kvedge_chat_message(self._ptr(), i, ctypes.byref(role), ctypes.byref(content)))
            out.append((role.value.decode("utf-8", "replace"), content.value.decode("utf-8", "replace")))
        return out

    def stats(self):
        """The chat's cache now, as a Stats dataclass."""
        return _stats(_lib.kvedge_chat_stats_sized, self._ptr())

    def save(self, path):
        """Saves the chat to `path` and `path`.chat, each atomically (kvedge_chat_save)."""
        _check(_lib.kvedge_chat_save(self._ptr(), _path(path)))

    def load(self, path):
        """Restores a chat saved over the same model and KV configuration
        (kvedge_chat_load); a refused file leaves the chat as it was."""
        _check(_lib.kvedge_chat_load(self._ptr(), _path(path)))
