"""kvedge from Python: examples/stream.c's story under a 64 KiB int4 KV budget."""
import sys
import kvedge

model = kvedge.Model(sys.argv[1] if len(sys.argv) > 1 else "models/stories260K.gguf")
session = kvedge.Session(model, policy="sinks", key_format="int4", value_format="int4",
                         budget_bytes=64 * 1024, temperature=0)
session.feed("Once upon a time")
print("Once upon a time", end="")
for piece in session.generate(200):
    print(piece, end="", flush=True)
s = session.stats()  # a dataclass
print(f"\nkvedge {kvedge.version()}: {s.tokens_seen} tokens seen, {s.tokens_held} held, {s.tokens_evicted} evicted; "
      f"KV {s.held_bytes} of {s.arena_bytes} bytes, {s.compression:.2f}x against f16")
