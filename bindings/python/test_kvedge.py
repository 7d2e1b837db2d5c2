"""Tests of the ctypes binding against the built library and the shipped model.

Run: KVEDGE_LIBRARY=build/release/libkvedge.so python3 -m unittest discover -s bindings/python -v
(ctest runs it as kvedge_python_test).
"""

import dataclasses
import pathlib
import tempfile
import threading
import unittest
import weakref

import kvedge

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODEL = ROOT / "models" / "stories260K.gguf"
PROMPT = "Once upon a time"
PROMPT_IDS = [1, 403, 407, 261, 378]
# llama2.c's greedy reference continuation of PROMPT (../shared/models/README.md).
GREEDY_50 = (", there was a little girl named Lily. She loved to play outside in the park. One day, "
             "she saw a big, red ball. She wanted to play with it, but it")
EXACT = dict(policy="full", key_format="f32", value_format="f32", temperature=0)


class ModelTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.model = kvedge.Model(MODEL)

    @classmethod
    def tearDownClass(cls):
        cls.model.close()

    def test_versions(self):
        self.assertEqual(kvedge.version().count("."), 2)
        self.assertEqual(kvedge._lib.kvedge_abi_version(), kvedge.ABI_VERSION)

    def test_info_is_a_dataclass_with_the_model_shape(self):
        info = self.model.info
        self.assertTrue(dataclasses.is_dataclass(info))
        self.assertEqual((info.format, info.vocab_size, info.n_layers, info.dim, info.n_heads, info.n_kv_heads),
                         ("gguf", 512, 5, 64, 8, 4))
        self.assertEqual((info.bos_token, info.eos_token, info.context_length), (1, 2, 512))

    def test_tokenize_and_pieces(self):
        self.assertEqual(self.model.tokenize(PROMPT), PROMPT_IDS)
        self.assertEqual(self.model.tokenize(PROMPT, add_bos=False), PROMPT_IDS[1:])
        self.assertEqual(self.model.tokenize(""), [1])
        # The leading space of the first word after BOS is dropped.
        self.assertEqual(self.model.token_piece(403, prev_token=1), b"Once")
        self.assertEqual(self.model.token_piece(407, prev_token=403), b" upon")

    def test_text_with_a_nul_is_refused_not_cut_short(self):
        with self.assertRaises(ValueError) as caught:
            self.model.tokenize("Once\0 upon")
        self.assertIn("byte 4", str(caught.exception))

    def test_invalid_utf8_bytes_become_byte_tokens(self):
        # As llama.cpp: a byte that starts no UTF-8 sequence gets its <0xFF> token.
        ids = self.model.tokenize(b"bad \xff byte")
        self.assertIn(b"\xff", [self.model.token_piece(t, prev_token=1) for t in ids])

    def test_missing_file_raises_not_found_with_the_path(self):
        with self.assertRaises(kvedge.KvedgeError) as caught:
            kvedge.Model(ROOT / "models" / "no-such-model.gguf")
        self.assertEqual(caught.exception.status, kvedge.NOT_FOUND)
        self.assertEqual(caught.exception.status_name, "not found")
        self.assertIn("no-such-model.gguf", caught.exception.message)
        self.assertIn("kvedge_model_load", str(caught.exception))

    def test_a_file_that_is_no_model_raises(self):
        with self.assertRaises(kvedge.KvedgeError) as caught:
            kvedge.Model(ROOT / "models" / "README.md")
        self.assertIn(caught.exception.status, (kvedge.INVALID_ARGUMENT, kvedge.CORRUPT, kvedge.UNSUPPORTED))
        self.assertTrue(caught.exception.message)

    def test_token_outside_the_vocabulary_raises(self):
        with self.assertRaises(kvedge.KvedgeError) as caught:
            self.model.token_piece(512)
        self.assertEqual(caught.exception.status, kvedge.INVALID_ARGUMENT)
        self.assertIn("512", caught.exception.message)


class SessionTest(unittest.TestCase):
    def setUp(self):
        self.model = kvedge.Model(MODEL)

    def tearDown(self):
        self.model.close()

    def test_greedy_generation_matches_the_reference_text(self):
        with kvedge.Session(self.model, **EXACT) as session:
            session.feed(PROMPT)
            text = "".join(session.generate(50))
            self.assertEqual(text, GREEDY_50)
            stats = session.stats()
            self.assertEqual(stats.tokens_seen, 55)
            self.assertEqual(stats.tokens_held, 55)

    def test_generate_is_lazy(self):
        with kvedge.Session(self.model, **EXACT) as session:
            session.feed(PROMPT_IDS)
            pieces = session.generate(50)
            first = [next(pieces) for _ in range(3)]
            self.assertEqual("".join(first), ", there was")
            self.assertEqual(session.stats().tokens_seen, 5 + 3)
            pieces.close()
            self.assertEqual(session.stats().tokens_seen, 5 + 3)

    def test_stats_dataclass_under_a_bounded_int4_cache(self):
        with kvedge.Session(self.model, policy="sinks", key_format="int4", value_format="int4",
                            budget_bytes=64 * 1024, temperature=0) as session:
            self.assertEqual(session.stats().compression, 0.0)
            session.feed(PROMPT)
            n = sum(1 for _ in session.generate(300))
            stats = session.stats()
            self.assertIsInstance(stats, kvedge.Stats)
            self.assertTrue(dataclasses.is_dataclass(stats))
            self.assertGreater(n, 0)
            self.assertLessEqual(stats.tokens_held, stats.capacity_tokens)
            self.assertEqual(stats.tokens_seen, stats.tokens_held + stats.tokens_evicted)
            self.assertLessEqual(stats.arena_bytes, 64 * 1024)
            self.assertLessEqual(stats.held_bytes, stats.arena_bytes)
            self.assertGreater(stats.tokens_evicted, 0)
            self.assertAlmostEqual(stats.compression, stats.f16_full_bytes / stats.held_bytes)
            self.assertGreater(stats.compression, 2.0)

    def test_same_seed_same_stream(self):
        def run():
            with kvedge.Session(self.model, temperature=0.8, seed=7) as session:
                session.feed(PROMPT)
                return "".join(session.generate(40))
        self.assertEqual(run(), run())

    def test_unknown_setting_names_raise(self):
        with self.assertRaises(TypeError):
            kvedge.Session(self.model, polcy="sinks")
        with self.assertRaises(kvedge.KvedgeError) as caught:
            kvedge.Session(self.model, key_format="int3")
        self.assertEqual(caught.exception.status, kvedge.INVALID_ARGUMENT)
        self.assertIn("'int3'", caught.exception.message)

    def test_budget_too_small_raises_out_of_budget(self):
        with self.assertRaises(kvedge.KvedgeError) as caught:
            kvedge.Session(self.model, budget_bytes=64)
        self.assertEqual(caught.exception.status, kvedge.OUT_OF_BUDGET)

    def test_generate_before_feeding_raises(self):
        with kvedge.Session(self.model) as session:
            with self.assertRaises(kvedge.KvedgeError) as caught:
                next(session.generate(5))
            self.assertEqual(caught.exception.status, kvedge.FAILED_PRECONDITION)
            with self.assertRaises(kvedge.KvedgeError):
                session.sample()

    def test_full_cache_raises_context_full(self):
        with kvedge.Session(self.model, policy="full", capacity_tokens=8, temperature=0) as session:
            session.feed(PROMPT)
            with self.assertRaises(kvedge.KvedgeError) as caught:
                list(session.generate(20))
            self.assertEqual(caught.exception.status, kvedge.CONTEXT_FULL)
            self.assertEqual(session.stats().tokens_held, 8)

    def test_logits_and_sample_agree_when_greedy(self):
        with kvedge.Session(self.model, **EXACT) as session:
            session.feed(PROMPT)
            logits = session.logits()
            self.assertEqual(len(logits), 512)
            self.assertEqual(session.sample(), max(range(512), key=logits.__getitem__))

    def test_session_outlives_its_closed_model(self):
        session = kvedge.Session(self.model, **EXACT)
        self.model.close()
        session.feed(PROMPT)
        self.assertEqual("".join(session.generate(3)), ", there was")
        session.close()
        with self.assertRaises(ValueError):
            session.feed(PROMPT)

    def test_dropping_the_last_reference_frees_at_once(self):
        session = kvedge.Session(self.model, **EXACT)
        session.feed(PROMPT)
        self.assertEqual(len(list(session.generate(3))), 3)
        ref = weakref.ref(session)
        del session
        self.assertIsNone(ref())

    def test_sessions_in_threads_match_one_by_one(self):
        def run(out, index):
            with kvedge.Session(self.model, **EXACT) as session:
                session.feed(PROMPT)
                out[index] = "".join(session.generate(50))
        out = [None] * 4
        threads = [threading.Thread(target=run, args=(out, i)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(out, [GREEDY_50] * 4)


class ChatTest(unittest.TestCase):
    SAMPLED = dict(capacity_tokens=96, temperature=0.8, seed=11)  # evicts; the RNG state must travel

    def setUp(self):
        self.model = kvedge.Model(MODEL)
        self.dir = tempfile.TemporaryDirectory()
        self.path = pathlib.Path(self.dir.name) / "chat.kvs"

    def tearDown(self):
        self.dir.cleanup()
        self.model.close()

    def test_turns_are_remembered_and_reset_keeps_the_system_prompt(self):
        with kvedge.Chat(self.model, system_prompt="You tell stories.", **EXACT) as chat:
            chat.add_message("user", PROMPT)
            text = chat.reply(20)
            self.assertTrue(text)
            self.assertEqual(chat.messages(), [("system", "You tell stories."), ("user", PROMPT), ("assistant", text)])
            self.assertGreater(chat.stats().tokens_held, 20)
            chat.reset()
            self.assertEqual(chat.messages(), [("system", "You tell stories.")])
            self.assertEqual(chat.stats().tokens_held, 0)

    def test_saved_and_loaded_chat_continues_as_if_never_stopped(self):
        a = kvedge.Chat(self.model, system_prompt="You tell stories.", **self.SAMPLED)
        b = kvedge.Chat(self.model, system_prompt="You tell stories.", **dict(self.SAMPLED, seed=99))
        a.add_message("user", PROMPT)
        a.reply(60)
        a.save(self.path)
        b.load(self.path)
        self.assertEqual(a.messages(), b.messages())
        self.assertGreater(b.stats().tokens_evicted, 0)
        a.add_message("user", "Then?")
        b.add_message("user", "Then?")
        self.assertEqual(a.reply(40), b.reply(40))
        self.assertEqual(a.stats(), b.stats())

    def test_a_damaged_file_raises_corrupt_and_leaves_the_chat_unchanged(self):
        chat = kvedge.Chat(self.model, **self.SAMPLED)
        chat.add_message("user", PROMPT)
        chat.reply(10)
        chat.save(self.path)
        chat.add_message("user", "More.")
        chat.reply(10)
        before = (chat.messages(), chat.stats())
        data = bytearray(self.path.read_bytes())
        data[len(data) // 2] ^= 0xFF
        self.path.write_bytes(bytes(data))
        with self.assertRaises(kvedge.KvedgeError) as caught:
            chat.load(self.path)
        self.assertEqual(caught.exception.status, kvedge.CORRUPT)
        self.assertIn("kvedge_chat_load", caught.exception.message)
        self.assertEqual((chat.messages(), chat.stats()), before)
        with self.assertRaises(kvedge.KvedgeError) as caught:
            chat.load(pathlib.Path(self.dir.name) / "absent.kvs")
        self.assertEqual(caught.exception.status, kvedge.NOT_FOUND)

    def test_session_save_and_load(self):
        with kvedge.Session(self.model, **self.SAMPLED) as a, \
                kvedge.Session(self.model, **dict(self.SAMPLED, seed=99)) as b:
            a.feed(PROMPT)
            list(a.generate(30))
            a.save(self.path)
            b.load(self.path)
            self.assertEqual(a.logits(), b.logits())
            self.assertEqual("".join(a.generate(30)), "".join(b.generate(30)))

    def test_unknown_setting_names_raise(self):
        with self.assertRaises(TypeError) as caught:
            kvedge.Chat(self.model, temprature=0)
        self.assertIn("kvedge.Chat: unknown setting(s) temprature", str(caught.exception))


if __name__ == "__main__":
    unittest.main()
