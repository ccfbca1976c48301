"""The parity battery: (reference, hypothesis, language) cases for the exact normalizers.

Shared by the Seed-TTS-eval parity test (jiwer 3 environment), the OpenAI
Whisper parity test (main environment) and the rate-equality test.  Written
for this project: every punctuation character of the Seed-TTS-eval set in
both texts, curly quotes, dashes, ellipses, apostrophes, hyphens, numbers,
currency, abbreviations, British spellings, casing, tabs and no-break spaces,
empty and hallucinated hypotheses, Chinese punctuation, traditional characters
in the hypothesis, rare simplified characters in the reference, mixed Chinese
and English, full-width forms, NFC/NFD and emoji.  Cases whose reference has
nothing left after normalization are included on purpose: the benchmark raises
on them and so must we.
"""

from __future__ import annotations

import string
import unicodedata

from zhon.hanzi import punctuation as ZHON_PUNCTUATION

Case = tuple[str, str, str]  # (reference, hypothesis, language)

_ENGLISH: list[tuple[str, str]] = [
    # plain and casing
    ("Hello world", "hello world"),
    ("HELLO WORLD", "Hello World"),
    ("The iPhone and NASA's rover", "the iphone and nasas rover"),
    ("McDonald's opened in MAY", "mcdonalds opened in may"),
    ("I saw a cat.", "I saw a hat."),
    # apostrophes: ASCII kept by Seed-TTS-eval, curly and full-width ones deleted
    ("Don't stop, it's fine.", "dont stop its fine"),
    ("Don’t stop, it’s fine.", "don't stop it's fine"),
    ("rock 'n' roll since the '90s", "rock n roll since the 90s"),
    ("It is five o'clock", "it is five o’clock"),
    ("the students' books", "the students books"),
    ("ʼokina and ʻokina", "okina and okina"),
    ("it＇s full width", "it's full width"),
    ("'quoted' words", "quoted words"),
    ("I'm gonna go, y'all", "i am going to go you all"),
    ("We'll see what they've done", "we will see what they have done"),
    ("won't can't shan't", "will not can not shall not"),
    # quotes
    ("He said “hello” to me", 'he said "hello" to me'),
    ("She said ‘no’ twice", "she said no twice"),
    ("«Bonjour» he said", "bonjour he said"),
    ("„Guten Tag“ she said", "guten tag she said"),
    ("‹single› guillemets", "single guillemets"),
    ("〝double prime〞 quotes", "double prime quotes"),
    # dashes and hyphens
    ("well-known twenty-one e-mail", "well known twenty one email"),
    ("pages 10–20 — roughly", "pages 10 20 roughly"),
    ("wait—what?", "wait what"),
    ("a ― horizontal bar", "a horizontal bar"),
    ("non‑breaking hyphen", "non breaking hyphen"),
    ("the hyphen‐minus", "the hyphen minus"),
    ("minus −5 degrees", "minus 5 degrees"),
    ("co-operate and re-enter", "cooperate and reenter"),
    ("--double dash--", "double dash"),
    # ellipses and dots
    ("Hello...", "hello"),
    ("Hello… wait…", "hello wait"),
    ("So . . . what", "so what"),
    ("End.", "end"),
    ("Dots ... in . the . middle", "dots in the middle"),
    ("....", "four dots"),
    # numbers and currency
    ("I have 20 apples", "i have twenty apples"),
    ("twenty-one guns", "21 guns"),
    ("It costs $5.50 today", "it costs five dollars fifty today"),
    ("£10 and €20 and ¥100", "10 pounds and 20 euros and 100 yen"),
    ("one hundred and two percent", "102%"),
    ("It was 50% off", "it was fifty percent off"),
    ("In 1999 and the 1990s", "in nineteen ninety nine and the nineties"),
    ("1,000,000 people", "a million people"),
    ("pi is 3.14159", "pi is three point one four"),
    ("the 2nd and 3rd place", "the second and third place"),
    ("$20.5 million", "twenty point five million dollars"),
    ("5¢ and 10 cents", "five cents and ten cents"),
    ("call 555-1234 now", "call 5551234 now"),
    ("at 5:30 p.m.", "at five thirty pm"),
    ("version 2.0.1", "version two point oh point one"),
    ("7 × 8 = 56", "seven times eight equals fifty six"),
    ("1/2 cup", "half a cup"),
    ("#1 fan @home", "number one fan at home"),
    ("100 km/h", "a hundred kilometers per hour"),
    ("4th of July, 1776", "fourth of july seventeen seventy six"),
    ("zero point five", "0.5"),
    ("a dozen eggs", "12 eggs"),
    # abbreviations and titles
    ("Mr. Smith met Dr. Jones", "mister smith met doctor jones"),
    ("Mrs. and Ms. Brown", "missus and ms brown"),
    ("St. Louis, Mo.", "saint louis missouri"),
    ("Prof. X and Capt. Y", "professor x and captain y"),
    ("the U.S.A. and the U.K.", "the usa and the uk"),
    ("e.g. apples, i.e. fruit, etc.", "for example apples that is fruit et cetera"),
    ("Gen. Lee and Sen. Ford", "general lee and senator ford"),
    ("John Jr. and John Sr.", "john junior and john senior"),
    ("Lt. Dan", "lieutenant dan"),
    ("vs. them", "versus them"),
    # British and American spellings
    ("The colour of the theatre", "the color of the theater"),
    ("my favourite neighbour", "my favorite neighbor"),
    ("organise the centre", "organize the center"),
    ("they travelled to see grey skies", "they traveled to see gray skies"),
    ("analyse the catalogue", "analyze the catalog"),
    ("defence licence programme", "defense license program"),
    ("aluminium and aeroplanes", "aluminum and airplanes"),
    # Whisper's fillers, brackets and its differences from the whisper-normalizer package
    ("It won't be, uh, a problem", "it will not be a problem"),
    ("um hmm mm well", "well"),
    ("The [inaudible] theatre (sic)", "the theater"),
    ("<noise> hello", "hello"),
    ("I kinda like it", "i kind of like it"),
    ("it's sorta fine", "it is sort of fine"),
    ("I dunno", "i do not know"),
    ("'cause I said so", "because i said so"),
    ("the cause of the fire", "the because of the fire"),
    ("20mm film", "20 mm film"),
    # whitespace: tabs, no-break and other spaces
    ("hello\tworld", "hello world"),
    ("hello world", "hello\tworld"),
    ("hello\u00a0world", "hello world"),
    ("hello \u00a0 world", "hello world"),
    ("hello\u2009thin\u202fspace", "hello thin space"),
    ("  leading and trailing  ", "leading and trailing"),
    ("line\nbreak\r\nhere", "line break here"),
    ("ideographic\u3000space", "ideographic space"),
    ("tab\t\tdouble", "tab double"),
    ("a  b   c    d", "a b c d"),
    ("zero\u200bwidth space", "zerowidth space"),
    ("soft\u00adhyphen", "softhyphen"),
    # full-width forms
    ("ＦＵＬＬ　ｗｉｄｔｈ！１２３", "full width 123"),
    ("ＨＥＬＬＯ，ｗｏｒｌｄ．", "hello world"),
    ("ｆｉｎｅ？（ｙｅｓ）", "fine yes"),
    # NFC / NFD and diacritics
    ("café naïve résumé", unicodedata.normalize("NFD", "café naïve résumé")),
    (unicodedata.normalize("NFD", "Crème brûlée"), "creme brulee"),
    ("Straße in Köln", "strasse in koln"),
    ("smørrebrød and æble", "smorrebrod and aeble"),
    ("ﬁne ligature", "fine ligature"),
    # symbols and emoji
    ("I love it 😀", "i love it"),
    ("thumbs 👍🏽 up", "thumbs up"),
    ("family 👨\u200d👩\u200d👧 photo", "family photo"),
    ("price: 5$ + 3€ = ?", "price 5 dollars plus 3 euros"),
    ("50°F & sunny", "50 degrees and sunny"),
    ("AT&T © 2024 ™", "at and t 2024"),
    ("a → b • c", "a b c"),
    ("snake_case and back\\slash", "snake case and backslash"),
    ("{braces} [brackets] (parens)", "braces brackets parens"),
    # empty and hallucinated hypotheses
    ("The quick brown fox", ""),
    ("The quick brown fox", "   "),
    ("The quick brown fox", "..."),
    ("Good morning", "Thank you for watching!"),
    ("Good morning", "good morning " * 40),
    ("Good morning", "the the the the the the the the the the the the the the the the"),
    ("Yes", "Subtitles by the Amara.org community"),
    ("Hi there", "♪ ♪ ♪"),
    ("Stop", "stop stop stop stop stop stop stop stop stop stop"),
    # references with nothing left after normalization
    ("...", "anything"),
    ("!!!", ""),
    ("— – …", "dash"),
    ("?", "?"),
]

_CHINESE: list[tuple[str, str]] = [
    # Chinese punctuation in both texts
    ("今天天气很好，我们去公园散步吧！", "今天天气很好我们去公园散步"),
    ("「你好」，他说。", "你好他说了"),
    ("这是一个测试、仅此而已；谢谢：", "这是测试而已谢谢你"),
    ("《红楼梦》是一部小说。", "红楼梦是一部小说"),
    ("他问：“你去哪儿？”", "他问你去哪儿"),
    ("【注意】请勿吸烟……", "注意请勿吸烟"),
    ("〔甲〕〖乙〗〘丙〙〚丁〛", "甲乙丙丁"),
    ("好——非常好～", "好非常好"),
    ("一·二·三", "一二三"),
    ("你好　世界", "你好世界"),
    ("什么？！真的吗？？", "什么真的吗"),
    ("她说：‘好的’。", "她说好的"),
    # traditional characters in the hypothesis (converted, reference left alone)
    ("今天天气很好", "今天天氣很好"),
    ("我们去公园散步", "我們去公園散步"),
    ("这是测试，对吗？", "這是測試，對嗎？"),
    ("头发很长", "頭髮很長"),
    ("复杂的问题", "複雜的問題"),
    ("后来他走了", "後來他走了"),
    ("了解情况", "瞭解情況"),
    ("借口太多", "藉口太多"),
    ("借口太多", "藉，口太多"),
    ("乾隆皇帝", "乾隆皇帝"),
    ("乾隆皇帝", "乾，隆皇帝"),
    ("干杯", "乾杯"),
    ("伙伴们", "夥伴們"),
    ("发展经济", "發展經濟"),
    ("理发店", "理髮店"),
    ("覆盖范围", "覆蓋範圍"),
    # rare but valid simplified characters in the reference (zhconv would change them)
    ("旭日东昇", "旭日东升"),
    ("旭日东昇", "旭日东昇"),
    ("於先生来了", "于先生来了"),
    ("於先生来了", "於先生来了"),
    ("馀下的钱", "余下的钱"),
    ("馀下的钱", "馀下的钱"),
    ("乾坤", "干坤"),
    ("余光中的诗", "余光中的诗"),
    # mixed Chinese and English
    ("我用iPhone拍照", "我用iphone拍照"),
    ("我用iPhone拍照", "我用 iPhone 拍照"),
    ("今天的meeting很重要", "今天的 meeting 很重要"),
    ("我喜欢NBA和CBA", "我喜欢nba和cba"),
    ("AI技术发展很快", "ai技术发展很快"),
    ("他说OK吧", "他说 okay 吧"),
    ("用Python写代码", "用 python 写代码"),
    ("我在New York住", "我在纽约住"),
    # full-width forms in Chinese
    ("价格是１２３元", "价格是123元"),
    ("ＡＢＣ公司", "ABC公司"),
    ("第１名！", "第一名"),
    ("（括号）与［方括号］", "括号与方括号"),
    ("百分之５０％", "百分之50%"),
    # numbers and symbols in Chinese
    ("二〇二四年", "2024年"),
    ("三点一四", "3.14"),
    ("一百元", "100元"),
    ("￥100和$5", "100元和5美元"),
    # whitespace in Chinese text
    ("你好\t世界", "你好世界"),
    ("你好\u00a0世界", "你好 世界"),
    ("你 好 世 界", "你好世界"),
    (" 前后有空格 ", "前后有空格"),
    # NFD and emoji in Chinese text
    ("咖啡café很好", "咖啡" + unicodedata.normalize("NFD", "café") + "很好"),
    ("我很开心😀", "我很开心"),
    ("点赞👍🏽", "点赞"),
    # empty and hallucinated hypotheses
    ("今天天气很好", ""),
    ("今天天气很好", "。。。"),
    ("今天天气很好", "谢谢观看"),
    ("今天天气很好", "字幕由Amara.org社区提供"),
    ("好的", "好的好的好的好的好的好的好的好的好的好的"),
    ("你好", "嗯嗯嗯嗯嗯嗯嗯嗯"),
    # references with nothing left after normalization
    ("。。。", "你好"),
    ("！？", ""),
    ("《》「」", "空"),
]


def _punctuation_cases() -> list[Case]:
    """Each character of Seed-TTS-eval's punctuation set inside a reference and inside a hypothesis."""
    cases: list[Case] = []
    for ch in sorted(set(string.punctuation)):
        cases.append((f"Hello{ch} world{ch}s {ch}again", "hello worlds again", "en"))
        cases.append(("it is fine now", f"it{ch}s fine {ch} now{ch}", "en"))
    for ch in sorted(set(ZHON_PUNCTUATION)):
        cases.append((f"你好{ch}世界{ch}", "你好世界", "zh"))
        cases.append(("good day to you", f"good{ch}day {ch}to you{ch}", "en"))
    return cases


CASES: list[Case] = (
    [(ref, hyp, "en") for ref, hyp in _ENGLISH]
    + [(ref, hyp, "zh") for ref, hyp in _CHINESE]
    + _punctuation_cases()
)

TEXTS: list[str] = sorted({text for ref, hyp, _ in CASES for text in (ref, hyp)})
"""Every distinct text of the battery, for the single-text normalizer checks."""
