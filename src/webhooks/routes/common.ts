/** What every /webhooks operation declares alike (src/webhooks/routes/). */
export const common = { tags: ["Webhooks"], credential: "account" as const };
