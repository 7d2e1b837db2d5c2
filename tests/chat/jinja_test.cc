// Jinja semantics beyond the conformance cases: whitespace control, scoping,
// loops, macros, filters, tests, string methods, errors, and the limits that
// keep hostile templates bounded. The expected texts of kSemantics were
// produced by Python jinja2 3.1 configured as transformers configures it
// (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols,
// transformers' tojson, raise_exception and strftime_now), with the messages
// of kMessages, add_generation_prompt true, bos "<s>", eos "</s>" and the time
// 2025-03-05T00:00:00; nullptr marks templates jinja2 refuses.
#include <string>

#include "gtest/gtest.h"
#include "runtime/chat/chat_template.h"
#include "runtime/chat/jinja_render.h"

namespace kvedge::chat {
namespace {

const char kMessages[] =
    R"J([{"role": "system", "content": "Sys  "}, {"role": "user", "content": "Héllo wörld 😀\n\tx — ÄÖÜ ß ǅ İ Σ"}, {"role": "assistant", "content": "ok", "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1, "b": [1.5, true, null, "é\"\\/"]}}}]}, {"role": "user", "content": " 123 ", "n": 7, "f": 2.5, "e": "", "l": [3, 1, 2], "d": {"b": 2, "a": 1}}])J";

struct Case {
  const char* source;
  const char* expected;  // nullptr: rendering must fail
};

const Case
    kSemantics
        [] =
            {
                {R"J({{ 1 + 2 }}|{{ 7 // 2 }}|{{ -7 // 2 }}|{{ 7 % -3 }}|{{ 2 ** 0.5 }}|{{ 10 / 3 }}|{{ 1e20 }}|{{ 1.0e-5 }}|{{ 0.1 + 0.2 }}|{{ 100000000000000000.0 }}|{{ 3.0 }}|{{ -0.0 }})J",
                 R"J(3|3|-4|-2|1.4142135623730951|3.3333333333333335|1e+20|1e-05|0.30000000000000004|1e+17|3.0|-0.0)J"},
                {R"J({{ 'a' ~ 1 ~ none ~ true ~ 1.5 ~ [1, 'b'] ~ {'k': "v'"} }})J",
                 R"J(a1NoneTrue1.5[1, 'b']{'k': "v'"})J"},
                {R"J({% for m in messages %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.revindex0 }}/{{ loop.first }}/{{ loop.last }}/{{ loop.length }}/{{ loop.previtem is defined }}/{{ loop.cycle('a','b') }};{% endfor %})J",
                 R"J(1/0/4/3/True/False/4/False/a;2/1/3/2/False/False/4/True/b;3/2/2/1/False/False/4/True/a;4/3/1/0/False/True/4/True/b;)J"},
                {R"J({% for m in messages if m.role == 'user' %}{{ loop.index }}:{{ m.content|trim }}|{% else %}none{% endfor %})J",
                 R"J(1:Héllo wörld 😀
	x — ÄÖÜ ß ǅ İ Σ|2:123|)J"},
                {R"J({% for m in [] %}x{% else %}empty{% endfor %})J", R"J(empty)J"},
                {R"J({% for k, v in messages[3].d.items() %}{{ k }}={{ v }},{% endfor %})J", R"J(b=2,a=1,)J"},
                {R"J({% for k in messages[3].d %}{{ k }}{% endfor %}|{% for c in 'héé' %}[{{ c }}]{% endfor %})J",
                 R"J(ba|[h][é][é])J"},
                {R"J({{ messages[1].content[::-1] }}|{{ messages[1].content|length }}|{{ messages[1].content[1:4] }}|{{ messages[1].content[-3:] }}|{{ [1,2,3,4,5][::2] }}|{{ [1,2,3,4,5][-2::-2] }})J",
                 R"J(Σ İ ǅ ß ÜÖÄ — x	
😀 dlröw olléH|30|éll|İ Σ|[1, 3, 5]|[4, 2])J"},
                {R"J({{ messages[1].content|upper }}|{{ messages[1].content|lower }}|{{ messages[1].content|title }}|{{ messages[1].content|capitalize }})J",
                 R"J(HÉLLO WÖRLD 😀
	X — ÄÖÜ SS Ǆ İ Σ|héllo wörld 😀
	x — äöü ß ǆ i̇ σ|Héllo Wörld 😀
	X — Äöü SS Ǆ İ Σ|Héllo wörld 😀
	x — äöü ß ǆ i̇ σ)J"},
                {R"J({{ messages[1].content.upper() }}|{{ messages[1].content.title() }}|{{ 'hello world-foo bar_baz'.title() }}|{{ 'hello world-foo (bar) baz'|title }})J",
                 R"J(HÉLLO WÖRLD 😀
	X — ÄÖÜ SS Ǆ İ Σ|Héllo Wörld 😀
	X — Äöü Ss ǅ İ Σ|Hello World-Foo Bar_Baz|Hello World-Foo (Bar) Baz)J"},
                {R"J({{ messages[0].content|tojson }}|{{ messages[2]|tojson }}|{{ messages[2].tool_calls|tojson(indent=2) }}|{{ messages[3].d|tojson(sort_keys=true) }}|{{ messages[1].content|tojson(ensure_ascii=true) }})J",
                 R"J("Sys  "|{"role": "assistant", "content": "ok", "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1, "b": [1.5, true, null, "é\"\\/"]}}}]}|[
  {
    "function": {
      "name": "f",
      "arguments": {
        "a": 1,
        "b": [
          1.5,
          true,
          null,
          "é\"\\/"
        ]
      }
    }
  }
]|{"a": 1, "b": 2}|"H\u00e9llo w\u00f6rld \ud83d\ude00\n\tx \u2014 \u00c4\u00d6\u00dc \u00df \u01c5 \u0130 \u03a3")J"},
                {R"J({{ messages|selectattr('role', 'equalto', 'user')|list|length }}|{{ messages|rejectattr('role', 'equalto', 'user')|map(attribute='role')|join(', ') }}|{{ messages|map(attribute='role')|unique|list }})J",
                 R"J(2|system, assistant|['system', 'user', 'assistant'])J"},
                {R"J({{ messages|selectattr('role', 'equalto', 'user')|length }})J", nullptr},
                {R"J({{ messages|selectattr('tool_calls')|list|length }}|{{ messages|selectattr('tool_calls', 'defined')|list|length }}|{{ messages|rejectattr('tool_calls', 'undefined')|map(attribute='role')|list }})J",
                 R"J(1|1|['assistant'])J"},
                {R"J({% set ns = namespace(found=false, n=0) %}{% for m in messages %}{% if m.role == 'user' %}{% set ns.found = true %}{% set ns.n = ns.n + 1 %}{% endif %}{% endfor %}{{ ns.found }} {{ ns.n }})J",
                 R"J(True 2)J"},
                {R"J({% set x = 1 %}{% for m in messages %}{% set x = x + 1 %}{{ x }}{% endfor %}{{ x }})J",
                 R"J(22221)J"},
                {R"J({% if true %}{% set y = 5 %}{% endif %}{{ y }})J", R"J(5)J"},
                {R"J({% macro greet(name, greeting='Hello') -%}
{{ greeting }}, {{ name }}!
{%- endmacro %}{{ greet('Bob') }}|{{ greet('Al', greeting='Hi') }}|{{ greet(name='X') }})J",
                 R"J(Hello, Bob!|Hi, Al!|Hello, X!)J"},
                {R"J({% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, k=4) }})J",
                 R"J(1(2, 3){'k': 4})J"},
                {R"J({% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, 2) }})J", nullptr},
                {R"J({% macro wrap() %}<{{ caller() }}>{% endmacro %}{% call wrap() %}inner {{ messages[0].role }}{% endcall %})J",
                 R"J(<inner system>)J"},
                {R"J({% macro wrap(x) %}<{{ caller(x * 2) }}>{% endmacro %}{% call(v) wrap(21) %}got {{ v }}{% endcall %})J",
                 R"J(<got 42>)J"},
                {R"J({% filter upper %}hello {{ messages[0].role }}{% endfilter %})J", R"J(HELLO SYSTEM)J"},
                {R"J({% set block %}
  Some text {{ 1 + 1 }}
{% endset %}[{{ block }}])J",
                 R"J([  Some text 2
])J"},
                {R"J({% set block | trim %}
  Some text
{% endset %}[{{ block }}])J",
                 R"J([Some text])J"},
                {R"J({% for m in messages %}
  {% if m.role == 'user' %}
    U: {{ m.content }}
  {% elif m.role == 'assistant' %}
    A: {{ m.content }}
  {% else %}
    S: {{ m.content }}
  {% endif %}
{% endfor %})J",
                 R"J(    S: Sys  
    U: Héllo wörld 😀
	x — ÄÖÜ ß ǅ İ Σ
    A: ok
    U:  123 
)J"},
                {R"J(  {%- for m in messages -%}
    [{{ m.role }}]
  {%- endfor -%}
end)J",
                 R"J([system][user][assistant][user]end)J"},
                {R"J(line1
    {% if true %}
    kept
    {% endif %}
    {{ 'var' }}
  {# comment #}
after
   {%+ if true %}plus{% endif %}
{% if true -%}   
   stripped
{%- endif %})J",
                 R"J(line1
    kept
    var
after
   plusstripped)J"},
                {R"J({% raw %}{{ not rendered }}{% endraw %}|{% raw -%}  x  {%- endraw %}|)J",
                 R"J({{ not rendered }}|x|)J"},
                {R"J({{ 'a' if false }}|{{ 'a' if false else 'b' }}|{{ none is none }}|{{ 1 is number }}|{{ 'x' is string }}|{{ messages is sequence }}|{{ messages[0] is mapping }}|{{ messages is iterable }}|{{ undefined_thing is defined }})J",
                 R"J(|b|True|True|True|True|True|True|False)J"},
                {R"J({{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 1 is true }}{{ true is true }}{{ 1 is integer }}{{ 1.0 is float }}{{ 'a' in 'cat' }}{{ 'z' not in 'cat' }}{{ 2 in [1,2] }}{{ 'role' in messages[0] }})J",
                 R"J(TrueTrueTrueFalseTrueTrueTrueTrueTrueTrueTrue)J"},
                {R"J({{ 1 < 2 < 3 }}{{ 3 > 2 > 2 }}{{ 1 == 1.0 }}{{ true == 1 }}{{ 'a' < 'b' }}{{ [1,2] < [1,3] }}{{ none == none }}{{ 'a' != 'a' }})J",
                 R"J(TrueFalseTrueTrueTrueTrueTrueFalse)J"},
                {R"J({{ 1 and 2 }}|{{ 0 and 2 }}|{{ 0 or 'x' }}|{{ '' or [] }}|{{ not none }}|{{ not 'a' }})J",
                 R"J(2|0|x|[]|True|False)J"},
                {R"J({{ messages[3].l|sort }}|{{ messages[3].l|sort(reverse=true) }}|{{ ['b','A','a','C']|sort }}|{{ ['b','A','a','C']|sort(case_sensitive=true) }}|{{ messages|sort(attribute='role')|map(attribute='role')|list }})J",
                 R"J([1, 2, 3]|[3, 2, 1]|['A', 'a', 'b', 'C']|['A', 'C', 'a', 'b']|['assistant', 'system', 'user', 'user'])J"},
                {R"J({{ messages[3].d|dictsort }}|{{ messages[3].d|dictsort(by='value', reverse=true) }}|{{ messages[3].d|items|list }})J",
                 R"J([('a', 1), ('b', 2)]|[('b', 2), ('a', 1)]|[('b', 2), ('a', 1)])J"},
                {R"J({{ messages[3].l|first }}|{{ messages[3].l|last }}|{{ messages[3].l|min }}|{{ messages[3].l|max }}|{{ messages[3].l|sum }}|{{ [1.5, 2]|sum }}|{{ 'abc'|first }}|{{ 'abc'|last }})J",
                 R"J(3|2|1|3|6|3.5|a|c)J"},
                {R"J({{ messages[3].content|int }}|{{ '3.7'|int }}|{{ 'x'|int }}|{{ 'x'|int(5) }}|{{ 3.9|int }}|{{ '2.5'|float }}|{{ 'x'|float }}|{{ 7|float }}|{{ '0x1A'|int(0, 16) }}|{{ ' 12 '|int }})J",
                 R"J(123|3|0|5|3|2.5|0.0|7.0|26|12)J"},
                {R"J({{ 2.5|round }}|{{ 3.5|round }}|{{ 2.675|round(2) }}|{{ 1.23456|round(3, 'floor') }}|{{ 1.2|round(0, 'ceil') }}|{{ -3|abs }}|{{ -2.5|abs }}|{{ 42|round }})J",
                 R"J(2.0|4.0|2.67|1.234|2.0|3|2.5|42)J"},
                {R"J({{ "a\nb\n\nc"|indent }}|{{ "a\nb\n\nc"|indent(2, true) }}|{{ "a\nb\n\nc"|indent(2, blank=true) }}|{{ "a\nb"|indent('> ', first=true) }})J",
                 R"J(a
    b

    c|  a
  b

  c|a
  b
  
  c|> a
> b)J"},
                {R"J({{ 'hello'|replace('l', 'L') }}|{{ 'hello'|replace('l', 'L', 1) }}|{{ 'abc'|replace('', '-') }}|{{ 'a b  c'.split() }}|{{ 'a,b,,c'.split(',') }}|{{ 'a,b,c'.split(',', 1) }}|{{ '  x  '.strip() }}|{{ 'xxhixx'.strip('x') }}|{{ '  x'.lstrip() }}|{{ 'x  '.rstrip() }})J",
                 R"J(heLLo|heLlo|-a-b-c-|['a', 'b', 'c']|['a', 'b', '', 'c']|['a', 'b,c']|x|hi|x|x)J"},
                {R"J({{ 'hello'.startswith('he') }}{{ 'hello'.endswith('lo') }}{{ 'hello'.startswith(('x', 'h')) }}{{ 'hello'.find('l') }}{{ 'hello'.count('l') }}{{ '-'.join(['a', 'b']) }}{{ 'a{}b{}'.format(1, 'x') }}{{ 'ab'.upper() }}{{ 'AB'.lower() }}{{ 'ab'.capitalize() }})J",
                 R"J(TrueTrueTrue22a-ba1bxABabAb)J"},
                {R"J({{ messages[0].get('role') }}|{{ messages[0].get('nope') }}|{{ messages[0].get('nope', 'dflt') }}|{{ messages[0].keys()|list }}|{{ messages[0].values()|list }}|{{ messages[0].items()|list }})J",
                 R"J(system|None|dflt|['role', 'content']|['system', 'Sys  ']|[('role', 'system'), ('content', 'Sys  ')])J"},
                {R"J({{ undefined_var }}|{{ undefined_var|default('d') }}|{{ ''|default('d') }}|{{ ''|default('d', true) }}|{{ none|default('d') }}|{{ undefined_var|length }}|{{ undefined_var|list }})J",
                 R"J(|d||d|None|0|[])J"},
                {R"J({{ undefined_var.attr }})J", nullptr},
                {R"J({{ messages[0].nope }}|{{ messages[0].nope is defined }}|{{ messages[9] }}|{{ none.x }})J",
                 R"J(|False||)J"},
                {R"J({{ messages[0].nope.deeper }})J", nullptr},
                {R"J({{ raise_exception('custom message: ' ~ messages[0].role) }})J", nullptr},
                {R"J({{ strftime_now('%Y-%m-%d %H:%M %A %B %d %b %j %-d') }})J",
                 R"J(2025-03-05 00:00 Wednesday March 05 Mar 064 5)J"},
                {R"J({{ range(5)|list }}|{{ range(2, 10, 3)|list }}|{{ range(10, 0, -3)|list }}|{% for i in range(3) %}{{ i }}{% endfor %})J",
                 R"J([0, 1, 2, 3, 4]|[2, 5, 8]|[10, 7, 4, 1]|012)J"},
                {R"J({{ [1, 2] + [3] }}|{{ 'ab' * 3 }}|{{ [0] * 3 }}|{{ (1, 2) }}|{{ (1,) }}|{{ () }}|{{ {'a': 1, 'b': [none, true]} }}|{{ "it's" }}|{{ ['it\'s', "q\"d", 'back\\slash', 'new\nline'] }})J", R"J([1, 2, 3]|ababab|[0, 0, 0]|(1, 2)|(1,)|()|{'a': 1, 'b': [None, True]}|it's|["it's", 'q"d', 'back\\slash', 'new\nline'])J"},
                {R"J({{ 'a' + 1 }})J", nullptr},
                {R"J({{ 1 + none }})J", nullptr},
                {R"J({{ none + 1 }})J", nullptr},
                {R"J({% for x in none %}{% endfor %})J", nullptr},
                {R"J({% for x in 5 %}{% endfor %})J", nullptr},
                {R"J({{ messages|length > 2 }}|{{ (messages|length) - 1 }}|{{ -messages|length }}|{{ - 3|abs }})J",
                 nullptr},
                {R"J({{ messages[-1]['content'] }}|{{ messages.0.role }}|{{ messages[0]['role'] }})J",
                 R"J( 123 |system|system)J"},
                {R"J({%- set loop_messages = messages[1:] -%}{% for m in loop_messages %}{{ m.role }}{% if not loop.last %},{% endif %}{% endfor %})J",
                 R"J(user,assistant,user)J"},
                {R"J({{ "\u00e9\x41\101\t|\N" }}|{{ '\d\s' }}|{{ "tab\there" }})J", nullptr},
                {R"J({% for m in messages %}{% if loop.index > 2 %}{% break %}{% endif %}{{ m.role }}{% endfor %}|{% for m in messages %}{% if loop.first %}{% continue %}{% endif %}{{ m.role }}{% endfor %})J",
                 R"J(systemuser|userassistantuser)J"},
                {R"J({% with a = 1, b = 'two' %}{{ a }}{{ b }}{% endwith %}{{ a }})J", R"J(1two)J"},
                {R"J({{ messages[3].e or 'empty' }}|{{ messages[3].n * 2 }}|{{ messages[3].f * 2 }}|{{ messages[3].n / 2 }}|{{ messages[3].n // 2 }})J",
                 R"J(empty|14|5.0|3.5|3)J"},
                {R"J({{ [3, 1, 2]|reverse|list }}|{{ 'abc'|reverse }}|{{ [1,2,3]|batch(2)|list }}|{{ 'a b c'|wordcount }}|{{ 'abc'|center(9) }}|{{ '%s-%d'|format('x', 3) }}|{{ '%s and %s' % ('a', 'b') }})J",
                 R"J([2, 1, 3]|cba|[[1, 2], [3]]|3|   abc   |x-3|a and b)J"},
                {R"J({{ 'abc' is lower }}{{ 'ABC' is upper }}{{ none is boolean }}{{ true is boolean }}{{ 'abc' is sameas 'abc' }}{{ messages[0] is callable }}{{ range is callable }})J",
                 R"J(TrueTrueFalseTrueFalseFalseTrue)J"},
                // str.islower()/isupper() and the lower/upper tests: some cased letter, none of the other case.
                {R"J({{ 'abc1'.islower() }}{{ 'aBc'.islower() }}{{ '12'.islower() }}{{ '\u00c9T\u00c9'.isupper() }}{{ 'A b' is upper }}{{ '\u00e9t\u00e9' is lower }})J",
                 R"J(TrueFalseFalseTrueFalseTrue)J"},
                {R"J({% if messages[0]['role'] == 'system' %}{% set system_message = messages[0]['content'] %}{% set loop_messages = messages[1:] %}{% else %}{% set loop_messages = messages %}{% endif %}{{ system_message|default('none') }}:{{ loop_messages|length }})J",
                 R"J(Sys  :3)J"},
                {R"J({{ messages[2].tool_calls[0].function.arguments|tojson }}|{{ messages[2].tool_calls[0].function.arguments|string }}|{{ messages[2].tool_calls[0].function.arguments.b }})J",
                 R"J({"a": 1, "b": [1.5, true, null, "é\"\\/"]}|{'a': 1, 'b': [1.5, True, None, 'é"\\/']}|[1.5, True, None, 'é"\\/'])J"},
                {R"J({{ [1, [2, {'x': none}]]|tojson(indent=4) }}|{{ {}|tojson(indent=2) }}|{{ []|tojson }}|{{ {'a': 1}|tojson(separators=(',', ':')) }}|{{ 1.0|tojson }}|{{ 1e100|tojson }})J",
                 R"J([
    1,
    [
        2,
        {
            "x": null
        }
    ]
]|{}|[]|{"a":1}|1.0|1e+100)J"},
                {R"J({% set x = [1, 2] %}{{ x.append(3) }})J", nullptr},
                {R"J({% set d = {'a': 1} %}{{ d.update({'b': 2}) }})J", nullptr},
                {R"J({% set a, b = 1, 2 %}{{ a }}{{ b }}|{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }}{% endfor %})J",
                 R"J(12|37)J"},
                {R"J({{ x }}{% set x = 3 %}{{ x }})J", R"J(3)J"},
                {R"J({% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(5) }})J",
                 R"J(54321)J"},
                {R"J({{ 'é'|length }}{{ '😀'|length }}{{ '👩‍👩‍👧'|length }}{{ '👩‍👩‍👧'[::-1] }}{{ '👍🏽'[0] }})J",
                 R"J(115👧‍👩‍👩👍)J"},
                {R"J({{ "  \u3000 x \u00a0"|trim }}|{{ "x\u200b"|trim }}|{{ " a\u2028b "|trim }})J",
                 R"J(x|x​|a b)J"},
                {R"J({{ loop }})J", R"J()J"},
                {R"J({{ messages['0'] }}|{{ messages[0:2]|map(attribute='role')|join('/') }})J", R"J(|system/user)J"},
                {R"J(a
  {%- if true %}
b
  {% endif -%}
  c)J",
                 R"J(ab
c)J"},
                {R"J({% if true %}
x{% endif %}
y)J",
                 R"J(xy)J"},
                {R"J(  {% for m in messages %}
  {{ m.role }}
  {% endfor %})J",
                 R"J(  system
  user
  assistant
  user
)J"},
                {R"J({# comment #}
line
  {#- stripped comment -#}
  after
{#+ plus #})J",
                 R"J(lineafter
)J"},
                {R"J(text {# c #} more {{- ' x ' -}} end)J", R"J(text  more x end)J"},
                {R"J({{- 'a' }}   {{ 'b' -}}   {{ 'c' }})J", R"J(a   bc)J"},
                {R"J(\r\nnot real)J", R"J(\r\nnot real)J"},
                {R"J({% set x = 'a' %}{{ x
}}{{ x ~
'b' }})J",
                 R"J(aab)J"},
                {R"J({{ 'unterminated }})J", nullptr},
                {R"J({% if %}{% endif %})J", nullptr},
                {R"J({% for %})J", nullptr},
                {R"J({% if true %}no end)J", nullptr},
                {R"J({% endif %})J", nullptr},
                {R"J({{ x | nosuchfilter }})J", nullptr},
                {R"J({{ x is nosuchtest }})J", nullptr},
                {R"J({% if false %}{{ x | nosuchfilter }}{% endif %})J", R"J()J"},
                {R"J({% include 'x' %})J", nullptr},
                {R"J({{ 1 +}})J", nullptr},
                {R"J({{ (1, 2)[0] }}{{ [1,2,3][1:] }}{{ {'a':{'b':1}}['a']['b'] }}{{ {'a':{'b':1}} }})J",
                 R"J(1[2, 3]1{'a': {'b': 1}})J"},
                {R"J({{ {'a': {'b': 1}}|tojson }})J", R"J({"a": {"b": 1}})J"},
                {R"J({{ 08 }})J", nullptr},
                {R"J({{ 1_000 + 0.5e1 + 1E2 }})J", R"J(1105.0)J"},
                {R"J({{ 'a' 'b' "c" }})J", R"J(abc)J"},
                {R"J({{ 1 if true else 2 if false else 3 }}|{{ 'x' if none }}|{{ (1 if false) is defined }})J",
                 R"J(1||False)J"},
                {R"J({{ not true == false }}|{{ not 1 in [1] }}|{{ -2 ** 2 }}|{{ 2 ** 3 ** 2 }}|{{ 1 + 2 * 3 - 4 / 2 }}|{{ 'a' ~ 1 + 2 }}|{{ 10 - 2 - 3 }}|{{ 2 * 3 % 4 }})J",
                 nullptr},
                {R"J({{ -1|abs }}|{{ -'a'|length }})J", nullptr},
                {R"J({{ 1 is divisibleby(2) }}|{{ 'abc' is in 'xabcx' }}|{{ 3 is gt 2 }}|{{ 3 is ge(3) }}|{{ messages|selectattr('n', 'gt', 5)|list|length }}|{{ [1,2,3,4]|select('odd')|list }}|{{ [1,2,3,4]|reject('even')|list }}|{{ [0,1,'',none,'a']|select|list }})J",
                 nullptr},
                {R"J({{ messages|map('lower')|list }})J",
                 R"J(["{'role': 'system', 'content': 'sys  '}", "{'role': 'user', 'content': 'héllo wörld 😀\\n\\tx — äöü ß ǆ i̇ σ'}", '{\'role\': \'assistant\', \'content\': \'ok\', \'tool_calls\': [{\'function\': {\'name\': \'f\', \'arguments\': {\'a\': 1, \'b\': [1.5, true, none, \'é"\\\\/\']}}}]}', "{'role': 'user', 'content': ' 123 ', 'n': 7, 'f': 2.5, 'e': '', 'l': [3, 1, 2], 'd': {'b': 2, 'a': 1}}"])J"},
                {R"J({{ messages|map(attribute='role')|map('upper')|join }}|{{ ['a','b']|map('replace', 'a', 'z')|list }}|{{ messages|map(attribute='missing', default='D')|list }})J",
                 R"J(SYSTEMUSERASSISTANTUSER|['z', 'b']|['D', 'D', 'D', 'D'])J"},
                {R"J({{ messages[3]['l']|join(',') }}|{{ messages|join(', ', attribute='role') }}|{{ [1, none, 'x']|join('-') }})J",
                 R"J(3,1,2|system, user, assistant, user|1-None-x)J"},
                {R"J({{ messages[0].role.nope }})J", R"J()J"},
                {R"J({{ messages[0].role.nope() }})J", nullptr},
                {R"J({{ messages[0]() }})J", nullptr},
                {R"J({{ [1,2,3][1.5] }})J", R"J()J"},
                {R"J({{ [1,2,3]['a'] }}|{{ {'a': 1}[none] }}|{{ 'abc'[5] }}|{{ 'abc'[-1] }})J", R"J(|||c)J"},
                {R"J({{ [][0] }}|{{ [] | first }}|{{ [] | last }}|{{ ''|first }})J", R"J(|||)J"},
                {R"J({% set x = namespace() %}{% set x.a = 1 %}{{ x.a }}{{ x.b }}|{{ namespace(a=1, b=2).b }})J",
                 R"J(1|2)J"},
                {R"J({% set x = {} %}{% set x.a = 1 %})J", nullptr},
                {R"J({% set s = 'abc' %}{% for c in s %}{{ loop.index }}{{ c }}{% endfor %}|{{ s|list }}|{{ s|unique|list }})J",
                 R"J(1a2b3c|['a', 'b', 'c']|['a', 'b', 'c'])J"},
                {R"J({{ ['A', 'a', 'b', 'B']|unique|list }}|{{ ['A', 'a']|unique(case_sensitive=true)|list }}|{{ messages|unique(attribute='role')|map(attribute='role')|list }})J",
                 R"J(['A', 'b']|['A', 'a']|['system', 'user', 'assistant'])J"},
                {R"J({% for a in [1, 2] %}{% for b in [3, 4] %}{{ loop.index }}{{ a }}{{ b }}{% endfor %}{{ loop.index }}{% endfor %})J",
                 R"J(11321411232242)J"},
                {R"J({% for x in [1,2,3] %}{{ loop.changed(x > 1) }}{{ loop.nextitem }}{% endfor %})J",
                 R"J(True2True3False)J"},
                {R"J({% macro m() %}{{ messages|length }}{% endmacro %}{% for messages in [[1]] %}{{ m() }}{% endfor %})J",
                 R"J(4)J"},
                {R"J({% set glob = 'G' %}{% macro m() %}{{ glob }}{% endmacro %}{{ m() }})J", R"J(G)J"},
                {R"J({% macro m(a, b) %}{{ a }}|{{ b }}|{{ b is defined }}{% endmacro %}{{ m(1) }})J", R"J(1||False)J"},
                {R"J({% macro m(a) %}{{ a }}{% endmacro %}{{ m(b=1) }})J", nullptr},
                {R"J({{ messages[1].content|wordcount }}|{{ "a\u00a0b"|wordcount }}|{{ 'x_y-z 1'|wordcount }})J",
                 R"J(8|2|3)J"},
                {R"J({{ 'abc' * -1 }}|{{ [1] * 0 }}|{{ 3 * 'ab' }}|{{ true + true }}|{{ 5 // 2.0 }}|{{ -5 % 2.0 }}|{{ 2 ** -2 }}|{{ 7 / 7 }})J",
                 R"J(|[]|ababab|2|2.0|1.0|0.25|1.0)J"},
                {R"J({{ 1 / 0 }})J", nullptr},
                {R"J({{ 1 % 0 }})J", nullptr},
                {R"J({{ messages[1].content|center(40) }}|{{ 'ab'|center(5) }}|{{ 'abc'|center(6) }})J",
                 R"J(     Héllo wörld 😀
	x — ÄÖÜ ß ǅ İ Σ     |  ab | abc  )J"},
                {R"J({{ 'Hello {}'.format('W') }}|{{ '{0}{1}{0}'.format('a', 'b') }}|{{ '{x}'.format(x=5) }}|{{ '{{}}'.format() }})J",
                 R"J(Hello W|aba|5|{})J"},
                {R"J({{ '%s' % 'a' }}|{{ '%d%%' % 50 }}|{{ '%s %s' % (1, 2) }}|{{ '%r' % 'q' }})J",
                 R"J(a|50%|1 2|'q')J"},
                {R"J({% set x %}{% endset %}[{{ x }}]|{% set y = 'a' ~ x %}{{ y }})J", R"J([]|a)J"},
                {R"J({{ '\n'.join(['a', 'b']) }}|{{ 'a\nb\r\nc'.splitlines() }}|{{ 'a  b'.split(' ') }}|{{ ' a b '.split(none, 1) }}|{{ 'a,b,c'.rsplit(',') }})J",
                 R"J(a
b|['a', 'b', 'c']|['a', '', 'b']|['a', 'b ']|['a', 'b', 'c'])J"},
                {R"J({{ messages[1].content|tojson }})J", R"J("Héllo wörld 😀\n\tx — ÄÖÜ ß ǅ İ Σ")J"},
                {R"J({{ "\x7f\x01\u2028"|tojson }}|{{ "\x7f\x01"|tojson(ensure_ascii=true) }}|{{ ["\u00e9", "😀"]|tojson(true) }})J",
                 R"J("\u0001 "|"\u007f\u0001"|["\u00e9", "\ud83d\ude00"])J"},
                {R"J({{ {1: 'a', true: 'b', none: 'c', 2.5: 'd'}|tojson }}|{{ {1: 'a', true: 'b'} }})J",
                 R"J({"1": "b", "null": "c", "2.5": "d"}|{1: 'b'})J"},
                {R"J({{ {(1, 2): 'a'}|tojson }})J", nullptr},
                {R"J({{ x|tojson }})J", nullptr},
                {R"J({{ messages[1] }})J", R"J({'role': 'user', 'content': 'Héllo wörld 😀\n\tx — ÄÖÜ ß ǅ İ Σ'})J"},
                {R"J({{ [messages[2].tool_calls[0].function.arguments] }}|{{ [1.5, -0.0, 1e-7, 123456789012345678.0] }}|{{ 1e16 }}|{{ 1.5e300 * 1e300 }}|{{ -1.5e300 * 1e300 }})J",
                 R"J([{'a': 1, 'b': [1.5, True, None, 'é"\\/']}]|[1.5, -0.0, 1e-07, 1.2345678901234568e+17]|1e+16|inf|-inf)J"},
                {R"J({{ "\t\n"|trim|length }}|{{ ' \xa0 x'|trim }}|{{ 'xyx'|trim('x') }}|{{ 'abc'|trim('') }})J",
                 R"J(0|x|y|abc)J"},
                {R"J({% for i in range(3) %}{% set outer = loop %}{% for j in range(2) %}{{ outer.index }}{{ loop.index }} {% endfor %}{% endfor %})J",
                 R"J(11 12 21 22 31 32 )J"},
                {R"J({{ range(3)|sum }}|{{ range(0)|list }}|{{ range(-3)|list }}|{{ range(1, 5)|length }}|{{ range(10)[2:5]|list }})J",
                 R"J(3|[]|[]|4|[2, 3, 4])J"},
                {R"J({{ range(1000000)|length }})J", nullptr},
                {R"J({{ 'abc'|batch(2)|list }}|{{ [1,2,3]|batch(2, 'x')|list }}|{{ {'a':1}|list }}|{{ {'a':1}|first }})J",
                 R"J([['a', 'b'], ['c']]|[[1, 2], [3, 'x']]|['a']|a)J"},
                {R"J({{ 'a' < 1 }})J", nullptr},
                {R"J({{ [1] < ['a'] }})J", nullptr},
                {R"J({{ messages < messages }}|{{ (1, 2) == [1, 2] }}|{{ {'a':1} == {'a':1.0} }})J",
                 R"J(False|False|True)J"},
                {R"J({{ x.y is defined }})J", nullptr},
                {R"J({{ x is defined and x.y }}|{{ x is not defined or x.y }}|{{ x is undefined }})J",
                 R"J(False|True|True)J"},
                {R"J({%- set ns = namespace(items=[]) -%}
{%- for m in messages -%}{%- set ns.items = ns.items + [m.role] -%}{%- endfor -%}
{{ ns.items|join(' ') }}|{{ ns }})J",
                 R"J(system user assistant user|<Namespace {'items': ['system', 'user', 'assistant', 'user']}>)J"},
                {R"J({{ none|string }}|{{ true|string }}|{{ 1.0|string }}|{{ [none]|string }}|{{ none|lower }}|{{ 3|upper }}|{{ ''|capitalize }})J",
                 R"J(None|True|1.0|[None]|none|3|)J"},
                {R"J({% for a, b in messages[3].d|dictsort %}{{ a }}{{ b }}{% endfor %}|{% for item in messages[3].d.items() %}{{ item[0] }}{{ item.1 }}{% endfor %})J",
                 R"J(a1b2|b2a1)J"},
                {R"J({% for a, b, c in [[1, 2]] %}{% endfor %})J", nullptr},
                {R"J({% for a, b in [[1, 2, 3]] %}{% endfor %})J", nullptr},
                {R"J({{ messages[0].content.strip() == 'Sys' }}|{{ messages[3].content.strip()|int + 1 }})J",
                 R"J(True|124)J"},
                {R"J({% if messages[0].role == 'system' -%}
  SYSTEM: {{ messages[0].content }}
{%- endif %}
{%- for m in messages[1:] %}
  {{- m.role }}
{% endfor %}
)J",
                 R"J(SYSTEM: Sys  user
assistant
user
)J"},
                {R"J({{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %})J",
                 nullptr},
                {R"J({{ 1/3 }}|{{ 2.5e-5 }}|{{ 1e22 }}|{{ 123456789.123 }}|{{ 1e16 - 1 }}|{{ 0.000123 }}|{{ 5e-324 }}|{{ 1.7976931348623157e308 }}|{{ '1e3'|int }}|{{ '1_000'|int }}|{{ '-12'|int }}|{{ '+5'|int }}|{{ ''|int }}|{{ '1.5e400'|float }}|{{ 'inf'|float }}|{{ 'nan'|float|string }})J",
                 R"J(0.3333333333333333|2.5e-05|1e+22|123456789.123|1e+16|0.000123|5e-324|1.7976931348623157e+308|1000|1000|-12|5|0|inf|inf|nan)J"},
                {R"J({{ messages }})J",
                 R"J([{'role': 'system', 'content': 'Sys  '}, {'role': 'user', 'content': 'Héllo wörld 😀\n\tx — ÄÖÜ ß ǅ İ Σ'}, {'role': 'assistant', 'content': 'ok', 'tool_calls': [{'function': {'name': 'f', 'arguments': {'a': 1, 'b': [1.5, True, None, 'é"\\/']}}}]}, {'role': 'user', 'content': ' 123 ', 'n': 7, 'f': 2.5, 'e': '', 'l': [3, 1, 2], 'd': {'b': 2, 'a': 1}}])J"},
                {R"J({{ messages[2].tool_calls }}|{{ messages[3].d.items()|list }}|{{ ["\x7f", "a'b", 'a"b', "a'\"b", "\u200d", "\x00"] }})J",
                 R"J([{'function': {'name': 'f', 'arguments': {'a': 1, 'b': [1.5, True, None, 'é"\\/']}}}]|[('b', 2), ('a', 1)]|['\x7f', "a'b", 'a"b', 'a\'"b', '\u200d', '\x00'])J"},
                {R"J({%- for m in messages -%}
    {%- if loop.index0 is even -%}E{%- else -%}O{%- endif -%}
    {{- loop.length -}}
{%- endfor -%}
{% for m in messages if m.role != 'system' %}{{ loop.index }}/{{ loop.length }}{% if loop.last %}!{% endif %}{% endfor %})J",
                 R"J(E4O4E4O41/32/33/3!)J"},
                {R"J(   {% if true %}   indented text {% endif %}   
	{% if true %}tab{% endif %}
x {% if true %}no-lstrip{% endif %}
  {{ 'var keeps indent' }}
  {%- if true %} minus{% endif %})J",
                 R"J(   indented text    
tabx no-lstrip  var keeps indent minus)J"},
                {R"J({%- macro render(m, suffix='') -%}
[{{ m.role }}{{ suffix }}]
{%- endmacro -%}
{%- for m in messages -%}
{{ render(m, suffix=loop.index) }}
{%- endfor %})J",
                 R"J([system1][user2][assistant3][user4])J"},
                {R"J({% set counter = namespace(v=0) %}{% macro bump() %}{% set counter.v = counter.v + 1 %}{% endmacro %}{{ bump() }}{{ bump() }}{{ counter.v }})J",
                 R"J(2)J"},
                {R"J({{ messages|map(attribute='content')|map('trim')|map('length')|list }}|{{ messages|map(attribute='role')|select('equalto', 'user')|list|count }})J",
                 R"J([3, 30, 2, 3]|2)J"},
                {R"J({% if messages[0].content is string and messages[0].content|length %}yes{% endif %}|{% if messages[2].tool_calls is sequence %}seq{% endif %}|{% if messages[2].tool_calls[0].function.arguments is mapping %}map{% endif %})J",
                 R"J(yes|seq|map)J"},
                {R"J({{ (messages|last).role }}|{{ (messages|first)['content']|trim }}|{{ messages[-1].content.strip() }}|{{ messages|selectattr('role', 'in', ['user', 'system'])|map(attribute='role')|list }})J",
                 R"J(user|Sys|123|['system', 'user', 'user'])J"},
                {R"J({{ "a" if messages else "b" }}|{{ messages and messages[0].role }}|{{ none or none }}|{{ (none or '') is none }})J",
                 R"J(a|system|None|False)J"},
                {R"J({% set ns = namespace(last_user=-1) %}{% for m in messages %}{% if m.role == 'user' %}{% set ns.last_user = loop.index0 %}{% endif %}{% endfor %}{{ ns.last_user }}|{{ messages[ns.last_user].content|trim }})J",
                 R"J(3|123)J"},
                {R"J({{ messages[1].content.split('\n')|join('|') }}|{{ messages[1].content.split()|length }}|{{ messages[1].content|wordcount }})J",
                 R"J(Héllo wörld 😀|	x — ÄÖÜ ß ǅ İ Σ|10|8)J"},
                {R"J({{ messages[3].content|trim|int * 2 }}|{{ (messages[3].content|trim|int) // 7 }}|{{ messages[3].n is divisibleby 7 }})J",
                 R"J(246|17|True)J"},
                {R"J({{ '{"a": 1}'|tojson }}|{{ messages[3].f|tojson }}|{{ messages[3].n|tojson }}|{{ true|tojson }}|{{ none|tojson }}|{{ (1, 'a')|tojson }}|{{ 'é'|tojson }})J",
                 R"J("{\"a\": 1}"|2.5|7|true|null|[1, "a"]|"é")J"},
                {R"J({{ messages[2]|tojson(indent=2, sort_keys=true) }})J", R"J({
  "content": "ok",
  "role": "assistant",
  "tool_calls": [
    {
      "function": {
        "arguments": {
          "a": 1,
          "b": [
            1.5,
            true,
            null,
            "é\"\\/"
          ]
        },
        "name": "f"
      }
    }
  ]
})J"},
                {R"J({{ messages[2]|tojson(indent='\t') }})J", R"J({
	"role": "assistant",
	"content": "ok",
	"tool_calls": [
		{
			"function": {
				"name": "f",
				"arguments": {
					"a": 1,
					"b": [
						1.5,
						true,
						null,
						"é\"\\/"
					]
				}
			}
		}
	]
})J"},
                {R"J({%- set sys = messages | selectattr('role', 'eq', 'system') | first -%}{{ sys.content }}|{{ (messages | selectattr('role', 'eq', 'nobody') | first) is defined }})J",
                 R"J(Sys  |False)J"},
                {R"J({{ messages|groupby('role') }})J",
                 R"J([('assistant', [{'role': 'assistant', 'content': 'ok', 'tool_calls': [{'function': {'name': 'f', 'arguments': {'a': 1, 'b': [1.5, True, None, 'é"\\/']}}}]}]), ('system', [{'role': 'system', 'content': 'Sys  '}]), ('user', [{'role': 'user', 'content': 'Héllo wörld 😀\n\tx — ÄÖÜ ß ǅ İ Σ'}, {'role': 'user', 'content': ' 123 ', 'n': 7, 'f': 2.5, 'e': '', 'l': [3, 1, 2], 'd': {'b': 2, 'a': 1}}])])J"},
                {R"J({% for k, v in {'b': 1, 'a': 2}|dictsort %}{{ k }}{{ v }}{% endfor %}|{% for k in {'b': 1, 'a': 2}|sort %}{{ k }}{% endfor %})J",
                 R"J(a2b1|ab)J"},
                {R"J({{ ''.join(['a', 'b']) }}|{{ ', '.join(messages|map(attribute='role')) }})J",
                 R"J(ab|system, user, assistant, user)J"},
                {R"J({{ 'abc'[1:] }}{{ 'abc'[:-1] }}{{ 'abc'[::2] }}{{ 'abc'[10:] }}{{ 'abc'[-10:] }}{{ [1,2,3][::-1] }}{{ [1,2,3][5:1:-1] }}{{ 'ab'[none:none] }})J",
                 R"J(bcabacabc[3, 2, 1][3]ab)J"},
                {R"J({% for i in range(3) %}{% if i == 1 %}{% continue %}{% endif %}{{ i }}{% else %}E{% endfor %}|{% for i in [] %}{% else %}{% for j in [1] %}{{ j }}{% endfor %}{% endfor %})J",
                 R"J(02|1)J"},
                {R"J({{ x.y }})J", nullptr},
                {R"J({{ messages.nope.nope }})J", nullptr},
                {R"J({{ messages[0]['nope']['nope'] }})J", nullptr},
                {R"J({{ messages|selectattr('nope.deeper')|list }})J", nullptr},
                {R"J({{ messages|map(attribute='tool_calls.0.function.name')|list }})J", nullptr},
                {R"J({{ 'x'|default }}|{{ nope|default }}|{{ nope|d('D') }}|{{ messages[0].nope|default(messages[0].role) }})J",
                 R"J(x||D|system)J"},
                {R"J({{ nope is none }}|{{ nope is string }}|{{ nope is number }}|{{ nope is mapping }}|{{ nope is sequence }}|{{ nope is iterable }}|{{ nope is callable }}|{{ nope is lower }})J",
                 R"J(False|False|False|False|True|True|True|False)J"},
                {R"J({{ nope == none }}|{{ nope != 1 }}|{{ not nope }}|{{ nope in messages }}|{{ 'a' in nope }})J",
                 R"J(False|True|True|False|False)J"},
                {R"J({{ nope < 1 }})J", nullptr},
                {R"J({{ nope|trim }}{{ nope|upper }}{{ nope|join }}{{ nope|string }}{{ nope|list }}{{ nope|first }}{{ nope|last }}{{ nope|length }}{{ nope|reverse|list }}{{ nope|sort }})J",
                 R"J([]0[][])J"},
                {R"J({{ nope|int }}|{{ nope|float }}|{{ nope|items|list }})J", nullptr},
                {R"J({{ nope|abs }})J", nullptr},
                {R"J({{ nope|tojson }})J", nullptr},
                {R"J({{ nope|dictsort }})J", nullptr},
                {R"J({{ nope|replace('a', 'b') }})J", R"J()J"},
                {R"J({{ nope|round }}
)J",
                 nullptr},
                {R"J({{ {'role': 1}|attr('role') }}|{{ {'role': 1}|attr('items') is defined }}|{{ 'a'|attr('upper') is defined }}|{{ messages|groupby('role')|map(attribute='grouper')|list }})J",
                 R"J(|True|True|['assistant', 'system', 'user'])J"},
                {R"J({% for g in messages|groupby('role') %}{{ g.grouper }}:{{ g.list|length }};{% endfor %}|{% for k, items in messages|groupby('role') %}{{ k }}{{ items|length }}{% endfor %})J",
                 R"J(assistant:1;system:1;user:2;|assistant1system1user2)J"},
                {R"J({{ nope|int }})J", nullptr},
                {R"J({{ nope|indent }})J", nullptr},
                {R"J({{ nope|format }}|{{ nope|center|length }}|{{ nope|sum }}|{{ nope is lower }}|{{ 'ABC1' is upper }}|{{ '1' is upper }})J",
                 R"J(|80|0|False|True|False)J"},
                {R"J({{ "%s"|format(nope) }}|{{ "a"|indent(first=true) }})J", R"J(|    a)J"},
                {R"J({% for x in messages %}{{ loop.depth }}{{ loop.depth0 }}{% endfor %})J", R"J(10101010)J"},
                {R"J({{ namespace(messages[0]).role }}|{{ dict(a=1, b=2) }}|{{ dict(messages[0], x=1) }}
)J",
                 R"J(system|{'a': 1, 'b': 2}|{'role': 'system', 'content': 'Sys  ', 'x': 1})J"},
                {R"J({% set x = 1 %}{% for i in [1,2] %}{{ x }}{% set x = x + 1 %}{{ x }}{% endfor %}{{ x }})J",
                 R"J(12121)J"},
                {R"J({% set x = 1 %}{% if true %}{% set x = 2 %}{% endif %}{{ x }}{% for i in [1] %}{% if true %}{% set x = 3 %}{% endif %}{{ x }}{% endfor %}{{ x }})J",
                 R"J(232)J"},
                {R"J({% macro m() %}{% set y = 5 %}{{ y }}{% endmacro %}{{ m() }}{{ y }})J", R"J(5)J"},
                {R"J({% for i in [1, 2] %}{% set outer_i = i %}{% for j in [3] %}{{ outer_i }}{{ i }}{{ j }}{% endfor %}{% endfor %})J",
                 R"J(113223)J"},
                {R"J({% macro outer() %}{% macro inner() %}I{% endmacro %}{{ inner() }}O{% endmacro %}{{ outer() }})J",
                 R"J(IO)J"},
                {R"J({% macro m(x) %}{{ caller(x) if caller is defined else x }}{% endmacro %}{{ m(1) }}|{% call(v) m(2) %}[{{ v }}]{% endcall %})J",
                 R"J(1|[2])J"},
                {R"J({% for m in messages %}{% macro show() %}{{ m.role }}{% endmacro %}{{ show() }}{% endfor %})J",
                 R"J(systemuserassistantuser)J"},
                {R"J({% set items = [] %}{% for m in messages %}{% set items = items + [m.role] %}{% endfor %}{{ items }})J",
                 R"J([])J"},
                {R"J({% with %}{% set inner = 1 %}{{ inner }}{% endwith %}{{ inner }})J", R"J(1)J"},
                {R"J({% for a in [[1, 2], [3, 4]] %}{% for b in a %}{{ loop.index }}{{ b }}{% endfor %}{{ loop.index }}{% endfor %})J",
                 R"J(1122113242)J"},
                {R"J({% for x in [1, 2, 3] %}{{ loop.previtem }}{{ loop.nextitem }}|{% endfor %})J", R"J(2|13|2|)J"},
                {R"J({% set x = 5 %}{% macro m() %}{{ x }}{% endmacro %}{% set x = 6 %}{{ m() }})J", R"J(6)J"},
                {R"J({% for i in range(2) %}{% set x = i %}{% endfor %}{{ x }})J", R"J()J"},
                {R"J({% if messages %}{% set first = messages[0] %}{% endif %}{{ first.role }})J", R"J(system)J"},
                {R"J({%- set ns = namespace(a=1) -%}{%- set ns2 = ns -%}{%- set ns2.a = 2 -%}{{ ns.a }})J", R"J(2)J"},
                {R"J({{ messages[0].role is defined and messages[0].role == 'system' }})J", R"J(True)J"},
                {R"J({% for message in messages %}{% if message.role == 'system' %}{% set sys = message.content %}{% endif %}{% endfor %}[{{ sys }}])J",
                 R"J([])J"},
                {R"J({% set a = 'x' %}{% set b %}{{ a }}{{ a }}{% endset %}{{ b|length }}{{ b }})J", R"J(2xx)J"},
                {R"J({{ caller }}|{{ varargs }}|{{ kwargs }}|{{ loop }})J", R"J(|||)J"},
                {R"J({% macro m() %}{{ varargs|length }}{{ kwargs|length }}{% endmacro %}{{ m() }}{{ m(1, 2) }}{{ m(a=1) }}
)J",
                 R"J(002001)J"},
};

StatusOr<std::string> RenderWith(const std::string& source, const jinja::RenderLimits& limits = {}) {
  ChatTemplateInputs in;
  in.messages_json = kMessages;
  in.add_generation_prompt = true;
  in.bos_token = "<s>";
  in.eos_token = "</s>";
  in.now = *ParseIsoTime("2025-03-05T00:00:00");
  return RenderChatTemplate(source, in, limits);
}

TEST(Jinja, SemanticsMatchPythonJinja2) {
  int n = 0;
  for (const Case& c : kSemantics) {
    SCOPED_TRACE(c.source);
    const auto got = RenderWith(c.source);
    if (c.expected == nullptr) {
      EXPECT_FALSE(got.ok()) << "rendered: " << *got;
    } else if (!got.ok()) {
      ADD_FAILURE() << got.status().ToString();
    } else {
      EXPECT_EQ(*got, c.expected);
    }
    ++n;
  }
  EXPECT_GT(n, 100);
}

TEST(Jinja, RaiseExceptionCarriesTheTemplatesMessage) {
  const auto r = RenderWith(
      "{% if messages[0].role == 'system' %}{{ raise_exception('No system: ' ~ messages|length) }}{% endif %}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "No system: 4");
}

TEST(Jinja, ErrorsNameTheLine) {
  auto r = RenderWith("line 1\n{{ 'a' + 1 }}");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("line 2"), std::string::npos) << r.status().message();
  r = RenderWith("a\nb\n{% for x in y %}");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("endfor"), std::string::npos) << r.status().message();
  r = RenderWith("{{ undefined_name.attr }}");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'undefined_name' is undefined"), std::string::npos) << r.status().message();
}

TEST(Jinja, UnsupportedFeaturesAreClearErrors) {
  for (const char* source :
       {"{% include 'other.jinja' %}", "{% extends 'base' %}", "{% for x in y recursive %}{% endfor %}",
        "{{ f(*args) }}", "{{ [1]|random }}", "{{ 'a'|urlize }}"}) {
    const auto r = RenderWith(source);
    ASSERT_FALSE(r.ok()) << source;
    EXPECT_EQ(r.status().code(), StatusCode::kUnsupported) << source << ": " << r.status().ToString();
  }
}

TEST(Jinja, TrailingNewlineAndLineEndings) {
  // One trailing newline of the source is dropped; \r\n and \r become \n.
  EXPECT_EQ(*RenderWith("a\n"), "a");
  EXPECT_EQ(*RenderWith("a\n\n"), "a\n");
  EXPECT_EQ(*RenderWith("a\r\nb\rc\r\n"), "a\nb\nc");
  EXPECT_EQ(*RenderWith("{% if true %}\r\nx{% endif %}"), "x");
}

TEST(Jinja, InvalidUtf8TemplateIsRefused) {
  const auto r = RenderWith("ok \xff bad");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("UTF-8"), std::string::npos);
}

TEST(Jinja, StepLimitStopsRunawayLoops) {
  jinja::RenderLimits limits;
  limits.max_steps = 100000;
  const auto r = RenderWith("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", limits);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
}

TEST(Jinja, OutputLimitStopsHugeStrings) {
  jinja::RenderLimits limits;
  limits.max_output_bytes = 1 << 20;
  for (const char* source :
       {"{{ 'x' * 100000000 }}", "{{ ['x'] * 100000000 }}",
        "{% for i in range(100000) %}{{ 'abcdefghijklmnopqrstuvwxyz' }}{% endfor %}",
        "{% set ns = namespace(s='xx') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}"}) {
    const auto r = RenderWith(source, limits);
    ASSERT_FALSE(r.ok()) << source;
    EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted) << source;
  }
}

TEST(Jinja, WorkLimitStopsQuadraticGrowth) {
  jinja::RenderLimits limits;
  limits.max_work_bytes = 10 << 20;
  const auto r = RenderWith(
      "{% set ns = namespace(s='') %}{% for i in range(100000) %}{% set ns.s = ns.s ~ 'abcdefgh' %}{% endfor %}",
      limits);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
}

TEST(Jinja, RecursionIsBounded) {
  auto r = RenderWith("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  // Deeply nested brackets, unary operators and blocks: refused, not a stack overflow.
  for (const std::string& source :
       {"{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}",
        "{{ " + std::string(100000, '-') + "1 }}", "{{ " + std::string(50000, '[') + std::string(50000, ']') + " }}",
        [] {
          std::string s;
          for (int i = 0; i < 10000; ++i) s += "{% if true %}";
          return s;
        }(),
        "{{ x" +
            [] {
              std::string s;
              for (int i = 0; i < 20000; ++i) s += "|trim";
              return s;
            }() +
            " }}"}) {
    r = RenderWith(source);
    ASSERT_FALSE(r.ok()) << source.substr(0, 40);
  }
}

TEST(Jinja, NowDefaultsToTheClockAndParsesIsoTimes) {
  ChatTemplateInputs in;
  in.messages_json = "[]";
  const auto r = RenderChatTemplate("{{ strftime_now('%Y') }}", in);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->size(), 4u);
  auto t = ParseIsoTime("2024-02-29 13:45");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->tm_wday, 4);  // a Thursday
  EXPECT_EQ(t->tm_yday, 59);
  EXPECT_FALSE(ParseIsoTime("2023-02-29T00:00:00").ok());
  EXPECT_FALSE(ParseIsoTime("2023-01-01T00:00:00Z").ok());
  EXPECT_FALSE(ParseIsoTime("yesterday").ok());
}

TEST(Jinja, MessagesJsonIsChecked) {
  EXPECT_TRUE(ParseMessagesJson("[]").ok());
  EXPECT_TRUE(ParseMessagesJson(R"({"messages": [{"role": "user", "content": "hi"}]})").ok());
  for (const char* bad :
       {"", "[", "{}", "[1]", "\"x\"", "[{\"content\": \"\xff\"}]", "[{\"n\": 18446744073709551615}]"}) {
    EXPECT_FALSE(ParseMessagesJson(bad).ok()) << bad;
  }
  std::string deep = std::string(1000, '[') + std::string(1000, ']');
  EXPECT_FALSE(ParseMessagesJson("[{\"x\": " + deep + "}]").ok());
}

TEST(Jinja, ChatMlFallback) {
  ChatTemplateInputs in;
  in.messages_json = R"([{"role": "system", "content": "S"}, {"role": "user", "content": "Hi"}])";
  in.add_generation_prompt = true;
  const auto r = RenderChatTemplate(kChatMlTemplate, in);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(Jinja, TemplatesRenderConcurrently) {
  auto tmpl = jinja::Template::Parse("{% for i in range(n) %}{{ i }},{% endfor %}");
  ASSERT_TRUE(tmpl.ok());
  jinja::DictData vars;
  vars.Set(jinja::Value::Str("n"), jinja::Value::Int(3));
  const auto a = tmpl->Render(vars);
  const auto b = tmpl->Render(vars);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, "0,1,2,");
  EXPECT_EQ(*a, *b);
}

}  // namespace
}  // namespace kvedge::chat
