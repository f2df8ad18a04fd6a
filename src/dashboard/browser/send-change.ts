/**
 * "Send a price change" (test mode): one offer of the account's sandbox changed through POST /test/observations, so a
 * person sees their test webhooks fire. That route takes a test key, not the account's token the page signs in with:
 * the page uses a test key created in this page (or pasted into the dialog), whose secret it keeps in this module's
 * memory only, never in storage, gone with the page (docs/dashboard.md).
 */
import type { components } from "../../../client/schema.d.ts";
import { PRODUCT_LINES } from "../../sandbox/world.ts";
import { api, apiWithKey } from "./api.ts";
import type { CreatedApiKey } from "./api-types.ts";
import { openDialog } from "./dialogs.ts";
import { attempt, byId, el, onSubmit, say, slotIn } from "./dom.ts";
import { TEST_KEY_PREFIX } from "./environment.ts";

type Product = components["schemas"]["Product"];
type IngestionResult = components["schemas"]["IngestionResult"];

/** Every sandbox SKU begins so (the contract; src/sandbox/catalogue.ts, which the page cannot import: it reads R2 types). */
const SANDBOX_SKU_PREFIX = "TEST-";
/** The dialog's first product: the sandbox's first (the same in every account), as src/sandbox/catalogue.ts names it. */
const FIRST_SKU = `${SANDBOX_SKU_PREFIX}${PRODUCT_LINES[0]!.code}-0001`;
const PASTE = "paste";

/** Test keys created in this page, by id: name, prefix and the full key. */
const held = new Map<string, { name: string; prefix: string; key: string }>();

/** Keeps a newly created test key (a live one is never kept) for this dialog. */
export function holdTestKey(created: CreatedApiKey): void {
  if (created.key.startsWith(TEST_KEY_PREFIX)) held.set(created.id, { name: created.name, prefix: created.prefix, key: created.key });
}

/** Told when the dialog creates a test key (the Keys view lists it). */
let testKeyCreated: () => Promise<void> = async () => {};
export function onTestKeyCreated(listener: () => Promise<void>): void {
  testKeyCreated = listener;
}

/** The product looked up, whose offers the dialog offers. */
let product: Product | undefined;

const form = () => byId<HTMLFormElement>("send-change-form");

/** The key chosen or pasted; an error that says what to do when there is none. */
function chosenKey(): string {
  const choice = byId<HTMLSelectElement>("change-key").value;
  const key = choice === PASTE ? byId<HTMLInputElement>("change-key-secret").value.trim() : held.get(choice)?.key;
  if (key?.startsWith(TEST_KEY_PREFIX)) return key;
  byId(choice === PASTE ? "change-key-secret" : "change-key").focus();
  throw new Error(
    key ? "That is not a test key: test keys begin pda_test_ (a live key cannot change the sandbox)." : "Paste a test key or create one.",
  );
}

function offerKeys(selected?: string): void {
  const select = byId<HTMLSelectElement>("change-key");
  select.replaceChildren(
    ...[...held].map(([id, { name, prefix }]) => el("option", { value: id }, `${name} (${prefix}…)`)),
    el("option", { value: PASTE }, "A test key I paste"),
  );
  select.value = selected ?? select.options[0]!.value;
  byId("change-key-paste").hidden = select.value !== PASTE;
}

/** The offers of the product looked up, and the chosen one's price lowered by a tenth as a suggestion. */
function showOffers(): void {
  const offers = product?.offers ?? [];
  const select = byId<HTMLSelectElement>("change-offer");
  select.replaceChildren(
    ...offers.map((offer) =>
      el(
        "option",
        { value: offer.competitor_id },
        `${offer.competitor_name}: ${offer.price} ${offer.currency}${offer.in_stock ? "" : ", out of stock"}`,
      ),
    ),
  );
  byId("change-product").textContent = product ? `${product.name}${product.brand ? ` · ${product.brand}` : ""}` : "";
  suggestPrice();
}

function suggestPrice(): void {
  const offer = product?.offers.find((o) => o.competitor_id === byId<HTMLSelectElement>("change-offer").value);
  if (!offer) return;
  const decimals = offer.price.split(".")[1]?.length ?? 0;
  byId<HTMLInputElement>("change-price").value = (Number(offer.price) * 0.9).toFixed(decimals);
  byId<HTMLInputElement>("change-in-stock").checked = offer.in_stock;
}

async function lookUp(): Promise<void> {
  const sku = byId<HTMLInputElement>("change-sku").value.trim();
  if (!sku) throw new Error(`Type the SKU of a sandbox product (it begins ${SANDBOX_SKU_PREFIX}).`);
  const { products } = await apiWithKey<{ products: Product[] }>(chosenKey(), "GET", `/products?sku=${encodeURIComponent(sku)}`);
  product = products[0];
  showOffers();
  if (!product)
    throw new Error(`Your sandbox has no product with the SKU “${sku}”: its SKUs begin ${SANDBOX_SKU_PREFIX}, e.g. ${FIRST_SKU}.`);
}

async function createKey(): Promise<void> {
  const created = await api<CreatedApiKey>("POST", "/api-keys", { name: "Dashboard: send a price change", environment: "test" });
  holdTestKey(created);
  offerKeys(created.id);
  await testKeyCreated();
  say(slotIn(form()), `Created the test key “${created.name}” (${created.prefix}…); this page keeps it until you leave.`);
  await lookUp();
}

async function send(): Promise<void> {
  const key = chosenKey();
  if (product?.sku !== byId<HTMLInputElement>("change-sku").value.trim()) {
    // Enter in the SKU field submits: look the new product up rather than change the one shown before.
    await lookUp();
    say(slotIn(form()), "Looked up: choose the offer and its new price, then send.");
    return;
  }
  const offer = product?.offers.find((o) => o.competitor_id === byId<HTMLSelectElement>("change-offer").value);
  if (!product || !offer) throw new Error("Look up a product first, then choose its offer.");
  const observation = {
    sku: product.sku,
    name: product.name,
    brand: product.brand,
    category: product.category,
    competitor: { id: offer.competitor_id, name: offer.competitor_name },
    price: byId<HTMLInputElement>("change-price").value.trim(),
    currency: offer.currency,
    in_stock: byId<HTMLInputElement>("change-in-stock").checked,
  };
  const result = await apiWithKey<IngestionResult>(key, "POST", "/test/observations", { observations: [observation] });
  const changes = result.price_changes + result.stock_changes;
  const was = `${offer.competitor_name}: ${offer.price} → ${observation.price} ${offer.currency}`;
  await lookUp(); // the offer as it is now
  say(
    slotIn(form()),
    changes
      ? `Sent (${was}). Your test webhooks get it within seconds: see Deliveries on the Webhooks view.`
      : "Sent, but nothing changed: that is already the offer's price and stock.",
  );
}

function openSendChange(): Promise<string> {
  const sendForm = form();
  sendForm.reset();
  product = undefined;
  offerKeys();
  byId<HTMLInputElement>("change-sku").value = FIRST_SKU;
  showOffers();
  const opened = openDialog(byId<HTMLDialogElement>("send-change-dialog"), byId("change-key"));
  if (held.size) void attempt(lookUp, slotIn(sendForm));
  return opened;
}

export function setUpSendChange(): void {
  const sendForm = form();
  const slot = slotIn(sendForm);
  onSubmit(sendForm, send);
  byId("open-send-change").addEventListener("click", () => void openSendChange());
  byId("change-key").addEventListener("change", () => {
    byId("change-key-paste").hidden = byId<HTMLSelectElement>("change-key").value !== PASTE;
  });
  byId("change-offer").addEventListener("change", suggestPrice);
  byId("change-look-up").addEventListener("click", (event) => void attempt(lookUp, slot, event.currentTarget as HTMLButtonElement));
  byId("change-create-key").addEventListener("click", (event) => void attempt(createKey, slot, event.currentTarget as HTMLButtonElement));
  // The pasted key leaves the page with the dialog; keys created here stay in memory for the next change.
  byId("send-change-dialog").addEventListener("close", () => {
    byId<HTMLInputElement>("change-key-secret").value = "";
  });
}
