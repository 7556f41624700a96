"""Development sets that look like users: other languages, second turns after a tool result, terse tools.

Writes BFCL-format folders beside this file, one per set, each with the categories the bench reads
(``simple_python``: one tool offered; ``multiple``: several, one fits; ``irrelevance``: the right
answer is no call):

    zh/  ja/  es/  en/   requests in Chinese (unspaced, full-width digits, 百分之五十), Japanese,
                         Spanish and English, to realistic tools (English descriptions mostly, a
                         few in the user's language, a few terse ones with no description)
    multiturn/           a second user request after a tool result, in the four languages: the
                         right answer a new call (values from the new request or from the result)
                         or, in ``irrelevance``, none (the answer is in the result)

They are development sets, to choose the decision layer's defaults on (read them freely); the
report split stays BFCL's. Each case's id ends in a tag saying what it stresses. Allowed values
follow the checker's convention: a list of acceptable values per argument, ``""`` among them where
the argument may be left out.

    python benchmarks/data/dev/make_dev.py            # rewrites the JSON files
    localtools bench --data benchmarks/data/dev/zh --category simple_python --mode constrained --levers
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


# ---------------------------------------------------------------------------------------------
# Tools, as BFCL function docs ("dict" for object). Realistic and short, English descriptions
# mostly, as users' tool code is.

def _p(kind: str, description: str = "", **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"type": kind}
    if description:
        out["description"] = description
    out.update(extra)
    return out


def _fn(name: str, description: str, required: list[str], **properties: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "description": description,
            "parameters": {"type": "dict", "properties": properties, "required": required}}


T: dict[str, dict[str, Any]] = {f["name"]: f for f in [
    _fn("get_weather", "Get the current weather for a city.", ["city"],
        city=_p("string", "City name"),
        unit=_p("string", "Temperature unit. Default celsius", enum=["celsius", "fahrenheit"])),
    _fn("get_forecast", "Weather forecast for the coming days.", ["city", "days"],
        city=_p("string", "City name"), days=_p("integer", "Number of days, 1-7", minimum=1, maximum=7)),
    _fn("convert_currency", "Convert an amount of money from one currency to another.",
        ["amount", "from_currency", "to_currency"],
        amount=_p("float", "Amount to convert"), from_currency=_p("string", "Three-letter currency code, e.g. USD"),
        to_currency=_p("string", "Three-letter currency code, e.g. EUR")),
    _fn("set_volume", "Set the speaker volume.", ["level"],
        level=_p("integer", "Volume level from 0 to 100", minimum=0, maximum=100)),
    _fn("set_brightness", "Set the screen brightness.", ["level"],
        level=_p("float", "Brightness from 0 (dark) to 100 (full)", minimum=0, maximum=100)),
    _fn("set_timer", "Start a countdown timer.", ["minutes"],
        minutes=_p("integer", "Length of the timer in minutes"), label=_p("string", "Name shown when it rings")),
    _fn("set_thermostat", "Set the thermostat.", ["temperature"],
        temperature=_p("float", "Target temperature in degrees Celsius")),
    _fn("play_music", "Play music.", ["query"],
        query=_p("string", "Artist, album, song or genre"), shuffle=_p("boolean", "Shuffle the tracks. Default false")),
    _fn("get_order", "Look up an order's status and carrier by order id.", ["order_id"],
        order_id=_p("string", "Order id, e.g. A-1001")),
    _fn("list_orders", "List the user's orders.", [],
        status=_p("string", "Only orders with this status", enum=["pending", "shipped", "delivered", "cancelled"]),
        order=_p("string", "Sort by order date. Default asc", enum=["asc", "desc"]),
        limit=_p("integer", "Most orders to return. Default 20")),
    _fn("refund_order", "Refund an order, in full or in part.", ["order_id"],
        order_id=_p("string", "Order id"), amount=_p("float", "Amount to refund; the full price when left out")),
    _fn("search_products", "Search the shop's catalog.", ["query"],
        query=_p("string", "What to look for"),
        sort=_p("string", "Default relevance", enum=["relevance", "price_asc", "price_desc", "newest"]),
        max_price=_p("float", "Highest price")),
    _fn("add_to_cart", "Add a product to the shopping cart.", ["product_id"],
        product_id=_p("string", "Product id"), quantity=_p("integer", "How many. Default 1")),
    _fn("translate_text", "Translate text into another language.", ["text", "target_language"],
        text=_p("string", "Text to translate"),
        target_language=_p("string", "ISO 639-1 code of the target language, e.g. en, fr")),
    _fn("send_email", "Send an email.", ["to", "subject", "body"],
        to=_p("string", "Recipient's email address"), subject=_p("string"), body=_p("string")),
    _fn("create_event", "Add an event to the calendar.", ["title", "date"],
        title=_p("string"), date=_p("string", "Date in the format YYYY-MM-DD"),
        time=_p("string", "Start time, HH:MM (24h)")),
    _fn("add_todo", "Add an item to the to-do list.", ["title"],
        title=_p("string"), priority=_p("string", "Default medium", enum=["low", "medium", "high"]),
        due_date=_p("string", "Due date in the format YYYY-MM-DD")),
    _fn("calculate_tip", "Calculate the tip for a bill.", ["bill", "percent"],
        bill=_p("float", "Bill amount"), percent=_p("float", "Tip percentage, e.g. 15")),
    _fn("apply_discount", "Price after a discount.", ["price", "discount"],
        price=_p("float", "Original price"), discount=_p("float", "Discount as a fraction of the price, from 0 to 1")),
    _fn("book_table", "Reserve a table at a restaurant.", ["restaurant", "party_size", "time"],
        restaurant=_p("string"), party_size=_p("integer", "Number of people"), time=_p("string", "HH:MM, 24-hour")),
    _fn("get_stock_price", "Current price of a stock by ticker symbol.", ["symbol"],
        symbol=_p("string", "Ticker symbol, e.g. AAPL")),
    _fn("place_order", "Buy or sell shares.", ["symbol", "side", "quantity"],
        symbol=_p("string", "Ticker symbol"), side=_p("string", enum=["buy", "sell"]),
        quantity=_p("integer", "Number of shares")),
    _fn("find_flights", "Search flights.", ["origin", "destination", "date"],
        origin=_p("string", "City or IATA airport code"), destination=_p("string", "City or IATA airport code"),
        date=_p("string", "YYYY-MM-DD"), passengers=_p("integer", "Default 1"),
        cabin=_p("string", "Default economy", enum=["economy", "premium_economy", "business", "first"])),
    _fn("book_flight", "Book a flight found by find_flights.", ["flight_id", "passengers"],
        flight_id=_p("string"), passengers=_p("integer")),
    _fn("search_hotels", "Find hotels.", ["city", "check_in", "nights"],
        city=_p("string"), check_in=_p("string", "YYYY-MM-DD"), nights=_p("integer"),
        max_price=_p("float", "Highest price per night")),
    _fn("get_customer", "Look up a customer record (name, plan, status) by customer id.", ["customer_id"],
        customer_id=_p("string")),
    _fn("update_plan", "Change a customer's subscription plan.", ["customer_id", "plan"],
        customer_id=_p("string"), plan=_p("string", enum=["free", "basic", "pro", "enterprise"])),
    _fn("get_news", "Latest news headlines on a topic.", ["topic"],
        topic=_p("string"), language=_p("string", "ISO 639-1 code"), sort=_p("string", enum=["newest", "relevance"])),
    # Descriptions (and one name) in the user's language.
    _fn("query_weather", "查询指定城市的实时天气。", ["city"], city=_p("string", "城市名称")),
    _fn("get_train_times", "2駅間の電車の時刻を調べる。", ["from_station", "to_station"],
        from_station=_p("string", "出発駅"), to_station=_p("string", "到着駅")),
    _fn("buscar_recetas", "Busca recetas por ingrediente.", ["ingrediente"],
        ingrediente=_p("string"), max_minutos=_p("integer", "Tiempo máximo de preparación")),
    # Terse tools, as hurried code writes them: no descriptions, short names.
    _fn("wx", "", ["loc"], loc=_p("string")),
    _fn("fx", "FX", ["a", "f", "t"], a=_p("float"), f=_p("string"), t=_p("string")),
    _fn("tmr", "timer", ["m"], m=_p("integer")),
    _fn("vol", "", ["v"], v=_p("integer", minimum=0, maximum=100)),
    _fn("ord", "order lookup", ["id"], id=_p("string")),
    _fn("tip", "", ["b", "p"], b=_p("float"), p=_p("float")),
]}

#: Tool sets an app offers together (``multiple``: the right tool among the others of its app).
APPS = {
    "travel": ["get_weather", "get_forecast", "find_flights", "search_hotels", "convert_currency"],
    "shop": ["search_products", "list_orders", "get_order", "refund_order", "add_to_cart"],
    "home": ["set_volume", "set_brightness", "set_timer", "play_music", "set_thermostat"],
    "office": ["send_email", "create_event", "add_todo", "translate_text"],
    "stocks": ["get_stock_price", "place_order", "get_news", "convert_currency"],
    "crm": ["get_customer", "update_plan", "send_email", "refund_order"],
}


def opt(*values: Any) -> list[Any]:
    """Allowed values of an optional argument: these, or left out."""
    return ["", *values]


def call(name: str, **allowed: Any) -> dict[str, Any]:
    """One expected call; each argument's allowed values (a bare value is the only one allowed)."""
    return {name: {k: (v if isinstance(v, list) else [v]) for k, v in allowed.items()}}


def tools_of(spec: str | list[str]) -> list[str]:
    return APPS[spec] if isinstance(spec, str) else spec


# ---------------------------------------------------------------------------------------------
# Single-turn cases per language: (tag, request, tools (an app's name or tool names), expected
# calls; [] for none).

Case = tuple[str, str, Any, list[dict[str, Any]]]
CITY_ZH = {"北京": ["北京", "北京市", "Beijing"], "上海": ["上海", "上海市", "Shanghai"], "深圳": ["深圳", "Shenzhen"],
           "广州": ["广州", "Guangzhou"], "成都": ["成都", "Chengdu"]}

ZH: dict[str, list[Case]] = {
    "simple_python": [
        ("weather_unspaced", "北京今天天气怎么样？", ["get_weather"],
         [call("get_weather", city=CITY_ZH["北京"], unit=opt("celsius"))]),
        ("weather_unit_in_words", "深圳现在多少度？用华氏度", ["get_weather"],
         [call("get_weather", city=CITY_ZH["深圳"], unit="fahrenheit")]),
        ("fullwidth_amount_codes", "帮我把１００美元换成人民币", ["convert_currency"],
         [call("convert_currency", amount=100, from_currency="USD", to_currency=["CNY", "RMB"])]),
        ("percent_words_0_100", "把音量调到百分之五十", ["set_volume"], [call("set_volume", level=50)]),
        ("percent_sign_0_100", "屏幕亮度调到80%", ["set_brightness"], [call("set_brightness", level=80)]),
        ("fullwidth_minutes", "设一个２５分钟的倒计时", ["set_timer"], [call("set_timer", minutes=25, label=opt())]),
        ("order_id", "我的订单A-778到哪了？", ["get_order"], [call("get_order", order_id="A-778")]),
        ("enum_in_words_desc", "列出我的订单，最新的在前，只看５个", ["list_orders"],
         [call("list_orders", order="desc", limit=5, status=opt())]),
        ("language_code", "把“早上好”翻译成英文", ["translate_text"],
         [call("translate_text", text="早上好", target_language=["en"])]),
        ("email_fields", "给zhangwei@example.com发封邮件，主题是会议改期，内容是：会议改到周五下午三点。", ["send_email"],
         [call("send_email", to="zhangwei@example.com", subject="会议改期",
               body=["会议改到周五下午三点。", "会议改到周五下午三点"])]),
        ("tip_percent_key", "账单２００元，给１５%的小费是多少？", ["calculate_tip"],
         [call("calculate_tip", bill=200, percent=15)]),
        ("discount_zhe_fraction", "原价３００元的东西打八折，折后多少钱？", ["apply_discount"],
         [call("apply_discount", price=300, discount=0.2)]),
        ("date_time_in_words", "在2025年5月1日加个日程：家庭聚餐，晚上6点半", ["create_event"],
         [call("create_event", title="家庭聚餐", date="2025-05-01", time="18:30")]),
        ("tool_described_in_zh", "上海天气如何", ["query_weather"], [call("query_weather", city=CITY_ZH["上海"])]),
        ("terse_tool", "帮我查下广州的天气", ["wx"], [call("wx", loc=CITY_ZH["广州"])]),
        ("number_in_words", "空调调到二十六度", ["set_thermostat"], [call("set_thermostat", temperature=26)]),
        ("boolean_in_words", "播放周杰伦的歌，随机播放", ["play_music"],
         [call("play_music", query=["周杰伦", "Jay Chou", "周杰伦的歌"], shuffle=True)]),
    ],
    "multiple": [
        ("forecast_days_fullwidth", "下周去成都，成都未来３天天气怎么样？", "travel",
         [call("get_forecast", city=CITY_ZH["成都"], days=3)]),
        ("enum_sort_in_words", "搜一下蓝牙耳机，价格从低到高排", "shop",
         [call("search_products", query=["蓝牙耳机"], sort="price_asc", max_price=opt())]),
        ("partial_refund", "订单B-2045退款５０元", "shop", [call("refund_order", order_id="B-2045", amount=50)]),
        ("company_to_ticker", "帮我查一下特斯拉的股价", "stocks", [call("get_stock_price", symbol="TSLA")]),
        ("number_in_words", "把音量调小到三十", "home", [call("set_volume", level=30)]),
        ("enum_priority_in_words", "加一个待办：交季度报告，优先级高", "office",
         [call("add_todo", title=["交季度报告"], priority="high", due_date=opt())]),
        ("passengers_in_words_date_digits", "帮我找一下2025-06-01从上海飞东京的航班，两个人，商务舱", "travel",
         [call("find_flights", origin=["上海", "Shanghai", "PVG", "SHA"], destination=["东京", "Tokyo", "NRT", "HND"],
               date="2025-06-01", passengers=2, cabin="business")]),
        ("enum_plan_in_words", "客户cust-2048想升级到专业版", "crm",
         [call("update_plan", customer_id="cust-2048", plan="pro")]),
        ("percent_words_0_100", "亮度调到百分之三十", "home", [call("set_brightness", level=30)]),
    ],
    "irrelevance": [
        ("chat", "给我讲个笑话", ["get_weather", "convert_currency"], []),
        ("fact", "长城有多长？", ["get_weather", "get_forecast"], []),
        ("writing", "帮我写一首关于秋天的诗", ["send_email", "translate_text"], []),
        ("near_miss_weather", "明天上海的天气怎么样", ["get_stock_price", "convert_currency"], []),
        ("near_miss_train", "我想订一张去北京的火车票", ["search_hotels", "get_weather"], []),
        ("arithmetic", "一加一等于几？", ["set_timer", "set_volume"], []),
    ],
}

CITY_JA = {"東京": ["東京", "東京都", "Tokyo"], "大阪": ["大阪", "大阪市", "Osaka"], "札幌": ["札幌", "Sapporo"],
           "京都": ["京都", "京都市", "Kyoto"], "福岡": ["福岡", "Fukuoka"]}

JA: dict[str, list[Case]] = {
    "simple_python": [
        ("weather_unspaced", "東京の天気は？", ["get_weather"], [call("get_weather", city=CITY_JA["東京"], unit=opt("celsius"))]),
        ("weather_unit_in_words", "大阪の天気を華氏で教えて", ["get_weather"],
         [call("get_weather", city=CITY_JA["大阪"], unit="fahrenheit")]),
        ("man_yen_amount", "１万円は何ドル？", ["convert_currency"],
         [call("convert_currency", amount=10000, from_currency="JPY", to_currency="USD")]),
        ("percent_sign_0_100", "音量を３０％にして", ["set_volume"], [call("set_volume", level=30)]),
        ("half_in_words", "画面の明るさを半分にして", ["set_brightness"], [call("set_brightness", level=50)]),
        ("minutes", "15分のタイマーをセットして", ["set_timer"], [call("set_timer", minutes=15, label=opt())]),
        ("order_id", "注文番号B-2045の配送状況を確認して", ["get_order"], [call("get_order", order_id="B-2045")]),
        ("enums_in_words", "発送済みの注文を新しい順に10件見せて", ["list_orders"],
         [call("list_orders", status="shipped", order="desc", limit=10)]),
        ("language_code", "「ありがとう」を英語に翻訳して", ["translate_text"],
         [call("translate_text", text="ありがとう", target_language="en")]),
        ("date_in_words", "2025年3月14日の10時に「週次定例」を予定に入れて", ["create_event"],
         [call("create_event", title="週次定例", date="2025-03-14", time="10:00")]),
        ("enum_priority_in_words", "「請求書を送る」を優先度高でTODOに追加", ["add_todo"],
         [call("add_todo", title="請求書を送る", priority="high", due_date=opt())]),
        ("enum_sort_in_words", "ワイヤレスイヤホンを安い順で検索して", ["search_products"],
         [call("search_products", query="ワイヤレスイヤホン", sort="price_asc", max_price=opt())]),
        ("tool_described_in_ja", "新宿から横浜までの電車の時間を調べて", ["get_train_times"],
         [call("get_train_times", from_station=["新宿", "新宿駅", "Shinjuku"], to_station=["横浜", "横浜駅", "Yokohama"])]),
        ("terse_tool_fullwidth", "３分タイマー", ["tmr"], [call("tmr", m=3)]),
        ("thermostat", "エアコンを２５度に設定して", ["set_thermostat"], [call("set_thermostat", temperature=25)]),
    ],
    "multiple": [
        ("forecast_days", "札幌の今後５日間の天気予報を教えて", "travel", [call("get_forecast", city=CITY_JA["札幌"], days=5)]),
        ("company_to_ticker", "トヨタの株価を調べて", "stocks",
         [call("get_stock_price", symbol=["7203", "7203.T", "TM", "7203 T"])]),
        ("full_refund_optional", "注文C-5531を全額返金して", "shop", [call("refund_order", order_id="C-5531", amount=opt())]),
        ("number_in_words", "ボリュームを七十にして", "home", [call("set_volume", level=70)]),
        ("email_fields", "tanaka@example.jpに「資料送付」という件名で「資料を添付しました。」とメールして", "office",
         [call("send_email", to="tanaka@example.jp", subject=["資料送付", "「資料送付」"],
               body=["資料を添付しました。", "資料を添付しました", "「資料を添付しました。」"])]),
        ("enum_plan_in_words", "顧客ID cust-3321 のプランをベーシックに変更して", "crm",
         [call("update_plan", customer_id="cust-3321", plan="basic")]),
        ("man_yen_price", "2025-07-20から3泊、京都のホテルを1泊2万円以下で探して", "travel",
         [call("search_hotels", city=CITY_JA["京都"], check_in="2025-07-20", nights=3, max_price=20000)]),
        ("price_limit", "USBケーブルを1000円以下で探して", "shop",
         [call("search_products", query=["USBケーブル", "USB ケーブル", "USB cable"], max_price=1000, sort=opt())]),
    ],
    "irrelevance": [
        ("fact", "富士山の高さは？", ["get_weather", "get_forecast"], []),
        ("chat", "面白い話をして", ["set_timer", "play_music"], []),
        ("near_miss_weather", "明日の東京の天気", ["convert_currency", "get_stock_price"], []),
        ("summary", "この文章を要約して：今日は晴れでした。午後は公園を散歩しました。", ["translate_text", "send_email"], []),
        ("recommendation", "おすすめのラーメン屋を教えて", ["book_table", "get_weather"], []),
        ("arithmetic", "5かける7は？", ["set_timer", "set_volume"], []),
    ],
}

ES: dict[str, list[Case]] = {
    "simple_python": [
        ("weather_city_exonym", "¿Qué tiempo hace en Londres?", ["get_weather"],
         [call("get_weather", city=["Londres", "London"], unit=opt("celsius"))]),
        ("weather_unit_in_words", "¿Cuántos grados hace en Sevilla? En Fahrenheit, por favor", ["get_weather"],
         [call("get_weather", city=["Sevilla", "Seville"], unit="fahrenheit")]),
        ("currency_in_words", "Convierte 250 euros a dólares", ["convert_currency"],
         [call("convert_currency", amount=250, from_currency="EUR", to_currency="USD")]),
        ("percent_words_0_100", "Pon el volumen al cincuenta por ciento", ["set_volume"], [call("set_volume", level=50)]),
        ("percent_sign_0_100", "Sube el brillo al 75%", ["set_brightness"], [call("set_brightness", level=75)]),
        ("minutes_in_words", "Pon un temporizador de diez minutos para la pasta", ["set_timer"],
         [call("set_timer", minutes=10, label=opt("pasta"))]),
        ("order_id", "¿Dónde está mi pedido A-9912?", ["get_order"], [call("get_order", order_id="A-9912")]),
        ("enums_in_words", "Muéstrame mis pedidos enviados, los más recientes primero", ["list_orders"],
         [call("list_orders", status="shipped", order="desc", limit=opt())]),
        ("language_code", "Traduce «buenos días» al inglés", ["translate_text"],
         [call("translate_text", text=["buenos días", "Buenos días"], target_language="en")]),
        ("party_in_words_time_digits", "Reserva una mesa en Casa Lucio para dos personas a las 20:30", ["book_table"],
         [call("book_table", restaurant="Casa Lucio", party_size=2, time="20:30")]),
        ("tip_percent_key", "Calcula la propina del 18% sobre una cuenta de 64 euros", ["calculate_tip"],
         [call("calculate_tip", bill=64, percent=18)]),
        ("discount_fraction", "¿Cuánto queda un abrigo de 120 euros con un 30% de descuento?", ["apply_discount"],
         [call("apply_discount", price=120, discount=0.3)]),
        ("enum_priority_in_words", "Añade «llamar al dentista» a mis tareas con prioridad alta", ["add_todo"],
         [call("add_todo", title="llamar al dentista", priority="high", due_date=opt())]),
        ("tool_named_in_es", "Busca recetas con garbanzos que se hagan en menos de 30 minutos", ["buscar_recetas"],
         [call("buscar_recetas", ingrediente="garbanzos", max_minutos=30)]),
        ("terse_tool_codes", "¿cuánto son 40 libras en euros?", ["fx"], [call("fx", a=40, f="GBP", t="EUR")]),
        ("number_in_words", "Pon el termostato a veintiún grados", ["set_thermostat"],
         [call("set_thermostat", temperature=21)]),
    ],
    "multiple": [
        ("flight_all_fields", "Busca vuelos de Madrid a Lisboa el 2025-05-02 para 3 pasajeros en business", "travel",
         [call("find_flights", origin=["Madrid", "MAD"], destination=["Lisboa", "Lisbon", "LIS"], date="2025-05-02",
               passengers=3, cabin="business")]),
        ("forecast_days_in_words", "Pronóstico de Valencia para los próximos cuatro días", "travel",
         [call("get_forecast", city="Valencia", days=4)]),
        ("enum_sort_price_limit", "Busca zapatillas de running, las más baratas primero, de menos de 80 euros", "shop",
         [call("search_products", query=["zapatillas de running", "zapatillas running", "running shoes"],
               sort="price_asc", max_price=80)]),
        ("company_to_ticker", "¿A cuánto cotiza Apple?", "stocks", [call("get_stock_price", symbol="AAPL")]),
        ("event_date_time", "Crea un evento «Dentista» el 2025-04-09 a las 17:15", "office",
         [call("create_event", title="Dentista", date="2025-04-09", time="17:15")]),
        ("percent_words_0_100", "Baja la música al veinte por ciento", "home", [call("set_volume", level=20)]),
        ("enum_plan_in_words", "El cliente cust-7781 quiere pasarse al plan gratuito", "crm",
         [call("update_plan", customer_id="cust-7781", plan="free")]),
        ("decimal_comma", "Devuélveme 15,50 € del pedido A-4410", "shop",
         [call("refund_order", order_id="A-4410", amount=15.5)]),
    ],
    "irrelevance": [
        ("chat", "Cuéntame un chiste", ["get_weather", "set_timer"], []),
        ("fact", "¿Quién escribió Don Quijote?", ["translate_text", "search_products"], []),
        ("near_miss_weather", "¿Qué tiempo hará mañana en Bilbao?", ["convert_currency", "get_stock_price"], []),
        ("writing", "Escríbeme un poema sobre el mar", ["send_email", "add_todo"], []),
        ("capital", "¿Cuál es la capital de Australia?", ["get_weather", "find_flights"], []),
        ("no_light_tool", "Apaga las luces del salón", ["set_volume", "set_thermostat"], []),
    ],
}

EN: dict[str, list[Case]] = {
    "simple_python": [
        ("lowercase_city", "weather in oslo rn?", ["get_weather"], [call("get_weather", city="Oslo", unit=opt("celsius"))]),
        ("percent_sign_0_100", "set brightness to 40%", ["set_brightness"], [call("set_brightness", level=40)]),
        ("enum_desc_limit", "show my last 5 orders, newest first", ["list_orders"],
         [call("list_orders", order="desc", limit=5, status=opt())]),
        ("k_amount", "convert 1.5k USD to EUR", ["convert_currency"],
         [call("convert_currency", amount=1500, from_currency="USD", to_currency="EUR")]),
        ("terse_tool", "what's it like outside in Denver?", ["wx"], [call("wx", loc=["Denver", "Denver, CO"])]),
        ("terse_percent", "15% tip on $80?", ["tip"], [call("tip", b=80, p=[15, 0.15])]),
        ("terse_half", "volume to half", ["vol"], [call("vol", v=50)]),
        ("terse_hash_id", "where's order #A-1203", ["ord"], [call("ord", id=["A-1203", "#A-1203"])]),
        ("boolean_shuffle", "play some lo-fi beats on shuffle", ["play_music"],
         [call("play_music", query=["lo-fi beats", "lo-fi", "lofi beats", "lofi"], shuffle=True)]),
        ("party_in_words_pm_time", "book a table for two at Nopa at 7:30pm", ["book_table"],
         [call("book_table", restaurant="Nopa", party_size=2, time="19:30")]),
        ("discount_fraction", "what's 20% off a $45 shirt", ["apply_discount"],
         [call("apply_discount", price=45, discount=0.2)]),
        ("fahrenheit_to_celsius", "set the thermostat to 68 F", ["set_thermostat"], [call("set_thermostat", temperature=20)]),
        ("terse_timer", "timer 3 min", ["tmr"], [call("tmr", m=3)]),
    ],
    "multiple": [
        ("forecast_hyphen_days", "5-day forecast for Lisbon pls", "travel", [call("get_forecast", city="Lisbon", days=5)]),
        ("partial_refund", "refund $12.99 on order A-5521", "shop", [call("refund_order", order_id="A-5521", amount=12.99)]),
        ("company_to_ticker", "how's Microsoft trading today", "stocks", [call("get_stock_price", symbol="MSFT")]),
        ("sort_and_limit", "find running shoes under 80 bucks, cheapest first", "shop",
         [call("search_products", query="running shoes", sort="price_asc", max_price=80)]),
        ("bare_number_0_100", "make the screen a bit darker, like 30", "home", [call("set_brightness", level=30)]),
        ("email_fields", "email bob@acme.io, subject: demo, body: The demo moved to 3pm.", "office",
         [call("send_email", to="bob@acme.io", subject="demo", body="The demo moved to 3pm.")]),
        ("hotel_fields", "hotels in Porto from 2025-08-10, 2 nights, max 90 a night", "travel",
         [call("search_hotels", city="Porto", check_in="2025-08-10", nights=2, max_price=90)]),
    ],
    "irrelevance": [
        ("chat", "tell me a joke", ["get_weather", "set_timer"], []),
        ("capital", "what's the capital of Peru?", ["get_weather", "find_flights"], []),
        ("near_miss_weather", "what's the weather tomorrow in Boston?", ["get_stock_price", "convert_currency"], []),
        ("terse_near_miss", "how tall is Everest?", ["wx", "tmr"], []),
        ("no_light_tool", "turn off the lights", ["set_volume", "set_thermostat"], []),
    ],
}


# ---------------------------------------------------------------------------------------------
# Second turns: (tag, first request, the calls made, their results, the next request, tools,
# expected calls). The calls are written as (name, arguments); results as JSON objects.

Turn = tuple[str, str, list[tuple[str, dict[str, Any]]], list[Any], str, Any, list[dict[str, Any]]]

PARIS_LONDON = [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "London"})]
PARIS_LONDON_RESULTS = [{"city": "Paris", "temp_c": 18, "condition": "cloudy"},
                        {"city": "London", "temp_c": 14, "condition": "rain"}]
ORDERS = [{"order_id": "A-1001", "date": "2025-03-02", "status": "delivered", "total": 42.5},
          {"order_id": "A-1057", "date": "2025-03-20", "status": "shipped", "total": 18.0},
          {"order_id": "A-0998", "date": "2025-02-11", "status": "delivered", "total": 7.99}]
CHARGERS = [{"product_id": "P-2417", "name": "65W USB-C charger", "price": 24.99},
            {"product_id": "P-1180", "name": "30W USB-C charger", "price": 15.49}]
FLIGHTS = [{"flight_id": "IB3402", "departs": "07:10", "price": 129},
           {"flight_id": "AF1001", "departs": "09:45", "price": 158}]

MULTITURN: dict[str, list[Turn]] = {
    "simple_python": [
        ("en_next_city", "What's the weather in Paris?", [("get_weather", {"city": "Paris"})],
         [{"temp_c": 18, "condition": "cloudy"}], "And in Rome?", ["get_weather"],
         [call("get_weather", city=["Rome", "Roma"], unit=opt("celsius"))]),
        ("zh_next_city", "北京天气怎么样？", [("get_weather", {"city": "北京"})], [{"temp_c": 23, "condition": "晴"}],
         "那上海呢？", ["get_weather"], [call("get_weather", city=CITY_ZH["上海"], unit=opt("celsius"))]),
        ("ja_next_city", "東京の天気は？", [("get_weather", {"city": "東京"})], [{"temp_c": 12, "condition": "晴れ"}],
         "じゃあ福岡は？", ["get_weather"], [call("get_weather", city=CITY_JA["福岡"], unit=opt("celsius"))]),
        ("es_next_amount_keeps_currencies", "¿Cuánto son 100 dólares en euros?",
         [("convert_currency", {"amount": 100, "from_currency": "USD", "to_currency": "EUR"})],
         [{"amount": 92.3, "currency": "EUR"}], "¿Y 250?", ["convert_currency"],
         [call("convert_currency", amount=250, from_currency="USD", to_currency="EUR")]),
        ("zh_next_percent_words", "把音量调到30", [("set_volume", {"level": 30})], [{"level": 30}],
         "再大一点，调到百分之六十", ["set_volume"], [call("set_volume", level=60)]),
        ("ja_result_number_pulls", "タイマーを5分にセットして", [("set_timer", {"minutes": 5})],
         [{"timer_id": 81, "remaining_seconds": 300}], "やっぱり八分にして", ["set_timer"],
         [call("set_timer", minutes=8, label=opt())]),
        ("en_next_customer_id", "Look up customer cust-1001", [("get_customer", {"customer_id": "cust-1001"})],
         [{"name": "Alice", "plan": "basic", "status": "active"}], "what about cust-2002?", ["get_customer"],
         [call("get_customer", customer_id="cust-2002")]),
        ("es_next_percent", "Pon el brillo al 40%", [("set_brightness", {"level": 40})], [{"level": 40}],
         "Mejor al 60", ["set_brightness"], [call("set_brightness", level=60)]),
        ("zh_earlier_list_not_carried", "北京和上海的天气",
         [("get_weather", {"city": "北京"}), ("get_weather", {"city": "上海"})],
         [{"city": "北京", "temp_c": 23}, {"city": "上海", "temp_c": 26}], "广州呢？", ["get_weather"],
         [call("get_weather", city=CITY_ZH["广州"], unit=opt("celsius"))]),
        ("en_earlier_list_not_carried", "weather in Paris and London?", PARIS_LONDON, PARIS_LONDON_RESULTS,
         "ok and Tokyo?", ["get_weather"], [call("get_weather", city="Tokyo", unit=opt("celsius"))]),
        ("es_value_from_earlier_call", "Traduce «hola» al inglés",
         [("translate_text", {"text": "hola", "target_language": "en"})], [{"translation": "hello"}],
         "¿Y al francés?", ["translate_text"], [call("translate_text", text=["hola", "Hola"], target_language="fr")]),
    ],
    "multiple": [
        ("en_result_number_pulls_quantity", "find me a usb-c charger", [("search_products", {"query": "usb-c charger"})],
         [CHARGERS], "add two of the first one to my cart", "shop",
         [call("add_to_cart", product_id="P-2417", quantity=2)]),
        ("zh_id_from_result", "看看我的订单", [("list_orders", {})], [ORDERS], "最新的那个订单现在到哪了？", "shop",
         [call("get_order", order_id="A-1057")]),
        ("ja_id_from_result_enum_in_words", "顧客cust-3321の情報を見せて", [("get_customer", {"customer_id": "cust-3321"})],
         [{"name": "田中", "plan": "basic", "status": "active"}], "この人のプランをプロに変えて", "crm",
         [call("update_plan", customer_id="cust-3321", plan="pro")]),
        ("en_earlier_list_not_covered", "compare AAPL and MSFT",
         [("get_stock_price", {"symbol": "AAPL"}), ("get_stock_price", {"symbol": "MSFT"})],
         [{"symbol": "AAPL", "price": 227.5}, {"symbol": "MSFT", "price": 415.1}], "buy 10 shares of MSFT", "stocks",
         [call("place_order", symbol="MSFT", side="buy", quantity=10)]),
        ("es_result_number_pulls_passengers", "Busca vuelos de Madrid a París el 2025-06-01",
         [("find_flights", {"origin": "Madrid", "destination": "París", "date": "2025-06-01"})], [FLIGHTS],
         "Reserva el más barato para dos personas", ["find_flights", "book_flight", "search_hotels"],
         [call("book_flight", flight_id="IB3402", passengers=2)]),
        ("zh_fullwidth_after_result", "北京现在多少度？", [("get_weather", {"city": "北京"})], [{"temp_c": 31, "condition": "晴"}],
         "太热了，把空调调到２６度", ["get_weather", "set_thermostat", "set_timer"],
         [call("set_thermostat", temperature=26)]),
        ("en_refund_optional_amount", "where's order A-778?", [("get_order", {"order_id": "A-778"})],
         [{"order_id": "A-778", "status": "delivered", "total": 59.9}], "it arrived broken, refund it", "shop",
         [call("refund_order", order_id="A-778", amount=opt(59.9))]),
        ("ja_body_from_result", "「会議は明日です」を英語にして",
         [("translate_text", {"text": "会議は明日です", "target_language": "en"})],
         [{"translation": "The meeting is tomorrow."}], "それをbob@example.comに件名「meeting」で送って", "office",
         [call("send_email", to="bob@example.com", subject=["meeting", "「meeting」"],
               body=["The meeting is tomorrow.", "The meeting is tomorrow"])]),
        ("es_earlier_pair_not_carried", "¿Qué tiempo hace en Madrid y en Sevilla?",
         [("get_weather", {"city": "Madrid"}), ("get_weather", {"city": "Sevilla"})],
         [{"city": "Madrid", "temp_c": 24}, {"city": "Sevilla", "temp_c": 31}], "¿Y el pronóstico de 3 días para Sevilla?",
         "travel", [call("get_forecast", city=["Sevilla", "Seville"], days=3)]),
        ("en_names_list_then_other_tool", "weather in Paris, Lima and Cairo?",
         [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Lima"}), ("get_weather", {"city": "Cairo"})],
         [{"city": "Paris", "temp_c": 18}, {"city": "Lima", "temp_c": 20}, {"city": "Cairo", "temp_c": 33}],
         "convert 100 EUR to PEN", "travel",
         [call("convert_currency", amount=100, from_currency="EUR", to_currency="PEN")]),
        ("en_percent_next_tool", "set volume to 40%", [("set_volume", {"level": 40})], [{"level": 40}],
         "and brightness to 70%", "home", [call("set_brightness", level=70)]),
    ],
    "irrelevance": [
        ("zh_answer_in_result", "北京天气怎么样？", [("get_weather", {"city": "北京"})],
         [{"temp_c": 23, "condition": "小雨"}], "那我需要带伞吗？", ["get_weather"], []),
        ("en_answer_in_result", "where's order A-778?", [("get_order", {"order_id": "A-778"})],
         [{"order_id": "A-778", "status": "shipped", "carrier": "DHL"}], "which carrier is it with?", "shop", []),
        ("ja_thanks", "１万円は何ドル？",
         [("convert_currency", {"amount": 10000, "from_currency": "JPY", "to_currency": "USD"})],
         [{"amount": 67.2, "currency": "USD"}], "ありがとう！", ["convert_currency"], []),
        ("es_answer_in_result", "Busca al cliente cust-1001", [("get_customer", {"customer_id": "cust-1001"})],
         [{"name": "Alice", "plan": "pro", "status": "active"}], "¿Qué plan tiene?", "crm", []),
        ("en_compare_results", "weather in Paris and London?", PARIS_LONDON, PARIS_LONDON_RESULTS,
         "which one is warmer?", ["get_weather"], []),
        ("zh_count_results", "看看我的订单", [("list_orders", {})], [ORDERS], "一共有几个订单？", "shop", []),
        ("ja_answer_in_result", "東京の天気は？", [("get_weather", {"city": "東京"})], [{"temp_c": 12, "condition": "晴れ"}],
         "じゃあコートは要る？", ["get_weather"], []),
        ("es_answer_in_result", "Busca vuelos de Madrid a París el 2025-06-01",
         [("find_flights", {"origin": "Madrid", "destination": "París", "date": "2025-06-01"})], [FLIGHTS],
         "¿Cuál sale antes?", ["find_flights", "book_flight"], []),
        ("en_compare_to_number", "what's ACME trading at?", [("get_stock_price", {"symbol": "ACME"})],
         [{"symbol": "ACME", "price": 123.45, "currency": "USD"}], "so is it above 120?", "stocks", []),
        ("zh_cheapest_in_result", "找一下USB-C充电器", [("search_products", {"query": "USB-C充电器"})], [CHARGERS],
         "哪个最便宜？", "shop", []),
    ],
}


# ---------------------------------------------------------------------------------------------

def _question(request: str) -> list[list[dict[str, Any]]]:
    return [[{"role": "user", "content": request}]]


def _turns(first: str, calls: list[tuple[str, dict[str, Any]]], results: list[Any], then: str) -> list[list[dict[str, Any]]]:
    """The conversation written out: the request, the reply's calls, their results, the next request."""
    if len(calls) != len(results):
        raise ValueError(f"{first!r}: {len(calls)} calls but {len(results)} results")
    reply = {"role": "assistant", "content": "",
             "tool_calls": [{"id": f"call{i + 1:05d}", "type": "function",
                             "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)}}
                            for i, (name, args) in enumerate(calls)]}
    answers = [{"role": "tool", "tool_call_id": f"call{i + 1:05d}", "content": json.dumps(r, ensure_ascii=False)}
               for i, r in enumerate(results)]
    return [[{"role": "user", "content": first}], [reply, *answers, {"role": "user", "content": then}]]


def _check(case_id: str, names: list[str], expected: list[dict[str, Any]]) -> None:
    """Every expected call names an offered tool and only its parameters; every required one is expected."""
    for want in expected:
        ((name, params),) = want.items()
        if name not in names:
            raise ValueError(f"{case_id}: expects {name}, which is not offered ({names})")
        schema = T[name]["parameters"]
        if unknown := set(params) - set(schema["properties"]):
            raise ValueError(f"{case_id}: {name} has no parameter {unknown}")
        if missing := [k for k in schema["required"] if k not in params or "" in params[k]]:
            raise ValueError(f"{case_id}: {name}'s required {missing} must be expected and not optional")
        for key, allowed in params.items():
            enum = schema["properties"][key].get("enum")
            if enum and (bad := [a for a in allowed if a != "" and a not in enum]):
                raise ValueError(f"{case_id}: {name}.{key} allows {bad}, outside its enum")


def write(folder: str, category: str, rows: list[tuple[str, list[list[dict[str, Any]]], list[str], list[dict[str, Any]]]]) -> int:
    out = HERE / folder
    (out / "possible_answer").mkdir(parents=True, exist_ok=True)
    questions, answers = [], []
    for index, (tag, question, names, expected) in enumerate(rows):
        case_id = f"{folder}_{category}_{index}_{tag}"
        _check(case_id, names, expected)
        questions.append({"id": case_id, "question": question, "function": [T[n] for n in names]})
        answers.append({"id": case_id, "ground_truth": expected})
    lines = "".join(json.dumps(q, ensure_ascii=False) + "\n" for q in questions)
    (out / f"BFCL_v4_{category}.json").write_text(lines, encoding="utf-8")
    truth = out / "possible_answer" / f"BFCL_v4_{category}.json"
    if category == "irrelevance":  # as BFCL: no answers; the right answer is no call
        truth.unlink(missing_ok=True)
    else:
        truth.write_text("".join(json.dumps(a, ensure_ascii=False) + "\n" for a in answers), encoding="utf-8")
    return len(rows)


def main() -> None:
    total = 0
    for folder, sets in (("zh", ZH), ("ja", JA), ("es", ES), ("en", EN)):
        for category, cases in sets.items():
            total += write(folder, category, [(tag, _question(request), tools_of(tools), expected)
                                              for tag, request, tools, expected in cases])
    for category, turns in MULTITURN.items():
        for tag, _, calls, _, _, tools, _ in turns:
            if unoffered := {name for name, _ in calls} - set(tools_of(tools)):
                raise ValueError(f"multiturn {tag}: the first turn calls {unoffered}, which are not offered")
        total += write("multiturn", category, [(tag, _turns(first, calls, results, then), tools_of(tools), expected)
                                               for tag, first, calls, results, then, tools, expected in turns])
    print(f"wrote {total} cases under {HERE}")


if __name__ == "__main__":
    main()
